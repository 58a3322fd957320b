"""Which model classes the build bakes vLLM's model-info cache for (templates/files/modelinfo_bake.py).

Every catalogue entry's `architecture` (entrypoint/models.toml), plus the classes the tests and the GPU
harness serve outside the catalogue (benchmarks/gpu/mkmodel.py makes tiny Qwen3 and Qwen3-MoE checkpoints).
The list is rendered into the variant's Dockerfile, so a changed architecture changes the Dockerfile and
rebuilds that one step; an entrypoint-only change does not.
"""

from entrypoint.launcher.catalogue import CATALOGUE_PATH, load_catalogue
from entrypoint.launcher.report import LaunchError
from prebake.errors import PrebakeError

BEYOND_CATALOGUE = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
CATALOGUE = CATALOGUE_PATH


def architectures() -> tuple[str, ...]:
    """Sorted and without repeats, so that the order of the catalogue's entries changes no layer."""
    try:
        catalogue = load_catalogue(CATALOGUE)
    except LaunchError as err:
        raise PrebakeError(str(err)) from None
    return tuple(sorted({spec.architecture for spec in catalogue.values() if spec.architecture}
                        | set(BEYOND_CATALOGUE)))
