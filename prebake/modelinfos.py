"""Which model classes the build bakes vLLM's model-info cache for (templates/files/modelinfo_bake.py).

Every catalogue entry's `architecture` (entrypoint/models.toml), the MTP draft class of each entry that may speculate
with `mtp` (vLLM inspects the draft's class as it does the model's: without its file, a dense pod's start paid a
subprocess that imports vLLM again for it), plus the classes the tests and the GPU harness serve outside the catalogue
(benchmarks/gpu/mkmodel.py makes tiny Qwen3 and Qwen3-MoE checkpoints).
The list is rendered into the variant's Dockerfile, so a changed architecture changes the Dockerfile and
rebuilds that one step; an entrypoint-only change does not.
"""

from entrypoint.launcher.podcheck import LaunchError, catalogue_classes
from prebake.errors import PrebakeError

BEYOND_CATALOGUE = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
CATALOGUE: str | None = None  # the image's entrypoint/models.toml; a test points it at another
# The class vLLM 0.27.1 makes an MTP draft of, by the model's class (config/speculative.py's hf_config_override:
# a qwen3_5 or qwen3_5_moe config becomes qwen3_5_mtp with this architecture).
MTP_DRAFTS = {"Qwen3_5ForConditionalGeneration": "Qwen3_5MTP", "Qwen3_5MoeForConditionalGeneration": "Qwen3_5MoeMTP"}

def architectures() -> tuple[str, ...]:
    """Sorted and without repeats, so that the order of the catalogue's entries changes no layer."""
    try:
        classes = catalogue_classes(CATALOGUE)
    except LaunchError as err:
        raise PrebakeError(str(err)) from None
    found = {architecture for architecture, _ in classes.values() if architecture}
    for key, (architecture, speculation) in classes.items():
        if "mtp" in speculation and architecture:
            if architecture not in MTP_DRAFTS:
                raise PrebakeError(f"entrypoint/models.toml: [models.{key}] allows speculation 'mtp', but prebake does "
                                   f"not know the MTP draft class of {architecture}: add it to MTP_DRAFTS in "
                                   "prebake/modelinfos.py (vLLM's config/speculative.py names it)")
            found.add(MTP_DRAFTS[architecture])
    return tuple(sorted(found | set(BEYOND_CATALOGUE)))
