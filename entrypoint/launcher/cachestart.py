"""The compile cache at vLLM's start (VL_CACHE_REPO; docs/caches.md): restore the archive (cacherestore.py), start
the publisher when the repository lacks it (cachepublish.py, a process of its own), and say so as a decision.

Apart from compilecache.py (the key, the CompileCache record, the status file), which both of those import.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from typing import Callable, Mapping

from ..contract import read_state, write_state
from .cacherestore import describe, restore
from .compilecache import write_status
from .report import Decision

# The publisher runs as this package's module (`python -m`), from the folder that holds the entrypoint package
# (/opt/prebake in the image, the checkout in tests).
PUBLISHER_MODULE = f"{__package__}.cachepublish"
PACKAGES_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def publisher_command(python: str, spec: dict, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    path = os.pathsep.join(filter(None, (PACKAGES_ROOT, env.get("PYTHONPATH"))))
    return [python, "-m", PUBLISHER_MODULE, json.dumps(spec)], {**env, "PYTHONPATH": path}


def start_of_vllm(plan, env: Mapping[str, str], log: Callable[[str], None], python: str,
                  stopped: Callable[[], bool] = lambda: False):
    """Before vLLM starts (not in a dry run): restore, start the publisher when the repository lacks the archive,
    and return the plan with the outcome as a decision (also added to state.json's, the status page's).
    Never raises."""
    cache = plan.compile_cache
    since = time.time()
    run_dir = plan.observe.run_dir if plan.observe else None
    write_status(run_dir, {"where": cache.where(), "restore": {"state": "restoring", "why": "downloading"},
                           "publish": {"state": "not yet", "why": "after the restore"}}, log)
    outcome = restore(cache, env, stopped=stopped)
    line = describe(outcome, cache)
    log(f"compile-cache: {line}")
    write_status(run_dir, {"restore": outcome.as_json(), "where": cache.where(),
                           "publish": {"state": "waiting for vLLM's first healthy start" if outcome.publish else
                                       "not published", "why": "the repository lacks it" if outcome.publish else
                                       outcome.why if outcome.state == "cold" else "restored"}}, log)
    if outcome.publish:
        bridge = plan.bridge
        health = (bridge.upstream if bridge.mode == "keepalive" else f"http://127.0.0.1:{bridge.vllm_port}") + "/health"
        spec = {"cache": cache.as_json(), "health_url": health, "since": since - 1, "run_dir": run_dir,
                "launcher_pid": os.getpid()}
        try:  # it forks and its parent returns at once: the publisher is tini's child, not vLLM's
            command, publisher_env = publisher_command(python, spec, env)
            subprocess.run(command, env=publisher_env, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError) as err:
            log(f"compile-cache: the publisher did not start ({err}); this start is not published")
    decision = Decision("compile-cache", line, "VL_CACHE_REPO; vLLM checks its own hash of what was restored")
    if plan.observe:  # the launcher is state.json's one writer; the bridge only reads it
        try:
            state = read_state(plan.observe.state_file)
            if state:
                state["decisions"] = [*state.get("decisions", []), decision.as_json()]
                write_state(plan.observe.state_file, state)
        except OSError:
            pass
    return dataclasses.replace(plan, decisions=(*plan.decisions, decision))
