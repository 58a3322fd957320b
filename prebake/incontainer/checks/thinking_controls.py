"""thinking-controls: Claude Code's thinking controls reach the engine through the image's vLLM and plugin.

The plugin's entry point must be installed in the venv; with vLLM in the lock, programs/
thinking_controls.py runs every request shape through vLLM's own classes for each catalogue
model that reasons (docs/selftest.md). Its passing outcome is kept under the stack, the plugins and what the
program takes from the launcher (program_records.py): an entrypoint change that alters neither reads it back.
"""

import importlib.metadata
import json
import os
import subprocess
import sys

from .. import program_records, vllm_programs
from ..common import VARIANT, Skipped

NAME = "thinking-controls"
LEVEL = VARIANT
USES_VLLM_PROGRAMS = True  # run.py starts the zygote's imports early (vllm_programs.py)
GROUP, PLUGIN = "vllm.general_plugins", "prebake_thinking"
PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "programs",
                       "thinking_controls.py")


def check(spec):
    installed = [ep for ep in importlib.metadata.entry_points(group=GROUP) if ep.name == PLUGIN]
    if not installed:
        return False, f"no {GROUP} entry point {PLUGIN!r} in the venv: the plugin install step did not run"
    if "vllm" not in spec["pins"]:
        raise Skipped(f"the {PLUGIN} entry point is installed; the lock pins no vllm to run the requests through")
    entrypoint_dir = os.path.dirname(spec["bridge"])
    found = subprocess.run([sys.executable, PROGRAM, "--launcher-inputs", entrypoint_dir], capture_output=True,
                           text=True, timeout=120)
    try:
        inputs = json.loads(found.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return False, f"the program gave no report (the launcher's inputs): {found.stderr.strip()[-1200:]}"
    record_key = program_records.key(spec, NAME, inputs)
    report = program_records.recorded(spec, record_key)
    how = " (vLLM's outcome recorded for this stack, plugin and launcher)" if report else ""
    if report is None:
        child = vllm_programs.run(PROGRAM, [entrypoint_dir])
        lines = child.stdout.strip().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, ValueError):
            return False, f"the program gave no report ({child.note}): {child.stderr.strip()[-1200:]}"
    failed = [f"{item['model']}: {item['case']}: {item['detail']}" for item in report["results"] if not item["ok"]]
    shapes = len(report["results"]) // max(1, len(report["models"]))
    summary = (f"{shapes} request shapes x {len(report['models'])} models ({', '.join(report['models'])}) through "
               f"vLLM's Anthropic conversion, sampling parameters and thinking-budget state, plugin {report['plugin']}"
               + how)
    if failed:
        return False, f"{len(failed)} failed: " + " | ".join(failed[:6]) + f". ({summary})"
    return True, summary, program_records.to_record(record_key, report)
