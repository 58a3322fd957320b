"""The launcher's state file for a bridge run alone (by a test): the bridge learns the launcher's decisions only
from it (contract.STATE in the run folder, serving/monitor.Duties), never from the launcher's knobs.

Built with contract's own classes (Observe, Journal, IdleStop) and writer, so it has the launcher's shape.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping

from entrypoint import contract


def write_launch_state(run_dir: Path, watchdog_s: int = 90, journal: contract.Journal | None = None,
                       idle_stop: contract.IdleStop | None = None, identity: Mapping[str, str] = ()) -> dict[str, str]:
    """state.json in `run_dir` as the launcher writes it before vLLM starts; the bridge's environment entry that
    points at it (PREBAKE_RUN_DIR)."""
    observe = contract.Observe(str(run_dir), watchdog_s, journal, idle_stop)
    contract.write_state(observe.state_file, {
        "identity": dict(identity), "decisions": [], "argv": [], "started_at": time.time(),
        "observe": observe.as_json(), "previous_run": None,
        "vllm": {"starts": [], "pid": None, "exit": None}, "swapping": None})
    return {contract.RUN_DIR_VARIABLE: str(run_dir)}
