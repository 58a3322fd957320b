"""claude-code-sessions: long Claude Code sessions keep vLLM's prefix cache and never dead-end on length.

With vLLM in the lock, programs/claude_code_sessions.py drives the image's own vLLM serving classes,
renderer, /v1/messages and /v1/chat/completions routers and exception handlers (a stand-in engine,
no GPU) with Claude Code's request shapes, through the plugins vLLM loads (docs/selftest.md). It takes nothing
from the launcher: its passing outcome is kept under the stack and the plugins (program_records.py).
"""

import json
import os

from .. import program_records, vllm_programs
from ..common import VARIANT, Skipped

NAME = "claude-code-sessions"
LEVEL = VARIANT
USES_VLLM_PROGRAMS = True  # run.py starts the zygote's imports early (vllm_programs.py)
PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "programs",
                       "claude_code_sessions.py")


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm to serve the requests with")
    record_key = program_records.key(spec, NAME, None)
    report = program_records.recorded(spec, record_key)
    how = " (vLLM's outcome recorded for this stack and plugin)" if report else ""
    if report is None:
        child = vllm_programs.run(PROGRAM, env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        lines = child.stdout.strip().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, ValueError):
            return False, f"the program gave no report ({child.note}): {child.stderr.strip()[-1200:]}"
    failed = [f"{item['case']}: {item['detail']}" for item in report["results"] if not item["ok"]]
    summary = (f"{len(report['results'])} cases through vLLM's /v1/messages and chat routers, a system-first Qwen "
               f"template, context {report['context']}, plugin {report['plugin']}" + how)
    if failed:
        return False, f"{len(failed)} failed: " + " | ".join(failed) + f". ({summary})"
    return True, summary, program_records.to_record(record_key, report)
