"""vllm-args: every catalogue model x host profile gives an argv the image's vLLM accepts."""

from importlib import metadata

from ..common import VARIANT, Skipped
from ..vllm_parse import rejections, vllm_outcome

NAME = "vllm-args"
LEVEL = VARIANT
USES_VLLM_PROGRAMS = True  # when vLLM has no recorded answer (vllm_programs.py)


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm, so there is no vLLM parser to check the launcher's argv with")
    found = vllm_outcome(spec)
    if not found["catalogue"]:
        return False, "the launcher made no argv at all: " + "; ".join(
            f"{label}: {why}" for label, why in found["refusals"][:5])
    outcome = found["outcome"]
    if found["recorded"] == found["parsed"]:
        how = (f"verdicts of vLLM {metadata.version('vllm')}'s serve parser recorded for this stack (launcher "
               f"runs {outcome['launcher_seconds']} s, no vLLM process)")
    else:
        how = (f"parsed by vLLM {metadata.version('vllm')}'s serve parser on {outcome['platform']} "
               f"({outcome['stub']}; launcher runs {outcome['launcher_seconds']} s, then stub and one vLLM process "
               f"{outcome['child_seconds']} s: import and parser {outcome['build_seconds']} s, "
               f"{found['parsed'] - found['recorded']} distinct argvs {outcome['parse_seconds']} s"
               + (f", {found['recorded']} more recorded for this stack" if found["recorded"] else "")
               + f"); parser names checked against {outcome['tool_parsers']} tool and "
               f"{outcome['reasoning_parsers']} reasoning parsers")
    notes = [f"{len(found['catalogue'])} argvs (catalogue models x host profiles) {how}"]
    if found["compat_hosts"]:
        notes.append(f"this image refuses {', '.join(sorted(found['compat_hosts']))} (built without cuda-compat): "
                     "their argvs come from a marker copy that names a compat folder")
    if found["refusals"]:
        notes.append("skipped, refused by the launcher: " + "; ".join(
            f"{label}: {why}" for label, why in found["refusals"][:6]) + (" ..." if len(found["refusals"]) > 6 else ""))
    rejected = rejections(found["catalogue"], found["errors"])
    record = {"verdicts": found["new_verdicts"]}  # for the host to record for this stack
    if rejected:
        return False, "vLLM rejects the launcher's argv for " + " | ".join(rejected) + f". ({'; '.join(notes)})", record
    return True, "; ".join(notes), record
