"""claude-code-sessions: long Claude Code sessions keep vLLM's prefix cache and never dead-end on length.

With vLLM in the lock, programs/claude_code_sessions.py drives the image's own vLLM serving classes,
renderer, /v1/messages and /v1/chat/completions routers and exception handlers (a stand-in engine,
no GPU) with Claude Code's request shapes, through the plugins vLLM loads (docs/selftest.md).
"""

import json
import os
import subprocess
import sys
import tempfile

from ..common import VARIANT, Skipped
from ..stub_libcuda import build_stub_libcuda

NAME = "claude-code-sessions"
LEVEL = VARIANT
PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "programs",
                       "claude_code_sessions.py")


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm to serve the requests with")
    with tempfile.TemporaryDirectory() as folder:
        stub_dir, stub_note = build_stub_libcuda(folder)
        env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        if stub_dir:
            env["LD_LIBRARY_PATH"] = stub_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        child = subprocess.run([sys.executable, PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    lines = child.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        return False, f"the program gave no report ({stub_note}): {child.stderr.strip()[-1200:]}"
    failed = [f"{item['case']}: {item['detail']}" for item in report["results"] if not item["ok"]]
    summary = (f"{len(report['results'])} cases through vLLM's /v1/messages and chat routers, a system-first Qwen "
               f"template, context {report['context']}, plugin {report['plugin']}")
    if failed:
        return False, f"{len(failed)} failed: " + " | ".join(failed) + f". ({summary})"
    return True, summary
