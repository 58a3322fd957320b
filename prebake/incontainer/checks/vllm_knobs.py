"""vllm-knobs: every VL_* knob setting, alone, on every model, gives an argv the image's vLLM accepts."""

from ..common import VARIANT, Skipped
from ..vllm_parse import rejections, vllm_outcome

NAME = "vllm-knobs"
LEVEL = VARIANT
USES_VLLM_PROGRAMS = True  # when vLLM has no recorded answer (vllm_programs.py)


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm, so there is no vLLM parser to check the launcher's argv with")
    found = vllm_outcome(spec)
    if not found["settings"]:
        return False, f"no knob settings were tried (knob host {found['knob_host']!r} not among the profiles?)"
    summary = (f"{found['settings']} VL_* settings x every catalogue model on {found['knob_host']}: "
               f"{len(found['knobs'])} argvs judged by vLLM (of all {found['parsed']} distinct argvs, "
               f"{found['recorded']} by verdicts recorded for this stack), {found['refused']} runs refused by the "
               "launcher itself")
    rejected = rejections(found["knobs"], found["errors"])
    problems = (["vLLM rejects the launcher's argv for " + " | ".join(rejected)] if rejected else []) + found["crashes"][:5]
    if problems:
        return False, " | ".join(problems) + f". ({summary})"
    return True, summary
