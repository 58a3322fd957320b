"""Run the checks a spec names, side by side, and print one JSON report in the spec's order."""

import concurrent.futures
import json
import time

from . import vllm_programs
from .checks import BY_NAME
from .common import Skipped

WORKERS = 3


def run_check(name, spec):
    """One report item. A check that crashes has failed, with the reason. A check may return a
    third element, a dict of data for the host (vllm-args: vLLM's verdicts, to record)."""
    skipped, extra = False, {}
    started = time.monotonic()
    try:
        ok, detail, *more = BY_NAME[name].check(spec)
        extra = more[0] if more else {}
    except Skipped as e:
        ok, detail, skipped = True, f"skipped: {e}", True
    except Exception as e:
        ok, detail = False, f"{e.__class__.__name__}: {e}"
    return {"check": name, "ok": ok, "detail": detail, "skipped": skipped,
            "seconds": round(time.monotonic() - started, 1), **extra}


def main(argv):
    """argv: the spec as JSON, or @PATH of a file holding it (a spec with recorded verdicts is
    larger than one command-line argument may be)."""
    if argv[0].startswith("@"):
        with open(argv[0][1:], encoding="utf-8") as f:
            spec = json.load(f)
    else:
        spec = json.loads(argv[0])
    if "vllm" in spec.get("pins", {}) and not spec.get("known_program_results") \
            and any(getattr(BY_NAME[name], "USES_VLLM_PROGRAMS", False) for name in spec["checks"]):
        # nothing recorded for this stack: vLLM's dependencies import while the checks before need none of them
        vllm_programs.start()
    # Side by side: most checks wait on a child process (the bridge, the launcher's runs, a vLLM program), and a
    # check's seconds then include the time it shared the cores. Checks that share a result compute it once
    # (vllm_parse, vllm_facts_probe); each check's failure stays its own (run_check).
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(run_check, name, spec) for name in spec["checks"]]
        report = [future.result() for future in futures]
    print(json.dumps(report))
    return 0 if all(item["ok"] for item in report) else 1
