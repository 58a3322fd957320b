"""Which model classes the build bakes vLLM's model-info cache for (templates/files/modelinfo_bake.py).

Every catalogue entry's `architecture` (entrypoint/models.toml), plus the classes the tests and the GPU
harness serve outside the catalogue (benchmarks/gpu/mkmodel.py makes tiny Qwen3 and Qwen3-MoE checkpoints).
The list is rendered into the variant's Dockerfile, so a changed architecture changes the Dockerfile and
rebuilds that one step; an entrypoint-only change does not.
"""

from entrypoint.launcher.podcheck import LaunchError, catalogue_architectures
from prebake.errors import PrebakeError

BEYOND_CATALOGUE = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
CATALOGUE: str | None = None  # the image's entrypoint/models.toml; a test points it at another

def architectures() -> tuple[str, ...]:
    """Sorted and without repeats, so that the order of the catalogue's entries changes no layer."""
    try:
        return tuple(sorted(catalogue_architectures(CATALOGUE) | set(BEYOND_CATALOGUE)))
    except LaunchError as err:
        raise PrebakeError(str(err)) from None
