"""The launcher's side of the run folder: where it is, what the bridge does beside relaying, and state.json's writes.

The launcher writes `state.json` in the run folder before it starts vLLM (the image, its decisions,
vLLM's command) and the supervisor updates it as vLLM starts and exits; the bridge reads it for the
status page (contract.py: the file and its reader). One writer, replaced atomically. The run folder
is on the volume when there is one (the cache root, caches.py), one folder per pod since a network
volume can be shared: a restarted container finds the previous run's state and log there.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from typing import Mapping

from ..contract import Observe, previous_run, read_state, write_state
from .caches import cache_root
from .knobs import Settings
from .report import Decision
from .idlestop import decide_idle_stop
from .journal import decide_journal


def pod_name(env: Mapping[str, str]) -> str:
    name = env.get("RUNPOD_POD_ID") or socket.gethostname() or "pod"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64]


def decide_observe(settings: Settings, env: Mapping[str, str], bridge_mode: str) -> tuple[Observe | None, list[Decision]]:
    idle_stop, idle_decision = decide_idle_stop(settings, env, bridge_mode)
    if bridge_mode != "keepalive":
        return None, [Decision("status", "off: no status page, vLLM log file or watchdog",
                               "VL_BRIDGE=off: vLLM holds the exposed port and replaces the launcher"), idle_decision]
    root, _ = cache_root(settings.value("VL_CACHE_ROOT"))
    pod = pod_name(env)
    if root:
        run_dir, where = os.path.join(root, "prebake", pod), f"on the volume ({root}): kept across restarts"
    else:
        run_dir, where = os.path.join(tempfile.gettempdir(), "prebake", pod), "no volume: on the container disk"
    watchdog = settings.value("VL_WATCHDOG")
    journal, journal_decision = decide_journal(settings, env, pod)
    observe = Observe(run_dir, watchdog, journal, idle_stop)
    return observe, [
        Decision("status", f"GET /prebake/status (JSON) and /prebake/status.txt on the exposed port; vLLM's output "
                           f"also in {observe.log_file}", where),
        Decision("watchdog", f"off (VL_WATCHDOG=0)" if not watchdog else
                 f"exit once vLLM's /health has failed for {watchdog} s while serving",
                 f"VL_WATCHDOG from {settings.source('VL_WATCHDOG')}; RunPod restarts a container that exits"),
        journal_decision, idle_decision]


def write_start(observe: Observe, identity: Mapping[str, str], decisions: list[dict], argv: list[str]) -> None:
    """The launcher's part, before vLLM starts (OSError: the caller reports it and serves without a status file)."""
    write_state(observe.state_file, {
        "identity": dict(identity), "decisions": decisions, "argv": argv, "started_at": time.time(),
        "observe": observe.as_json(), "previous_run": previous_run(read_state(observe.state_file)),
        "vllm": {"starts": [], "pid": None, "exit": None}, "swapping": None})


def update_vllm(path: str, argv: list[str] | None = None, **changes) -> None:
    """The supervisor's part: pid and start time on each start, {code, at, why} on exit; the argv (redacted)
    of the vLLM it started, which a swap changes. Never raises."""
    try:
        state = read_state(path)
        if argv is not None:
            state["argv"] = argv
        vllm = state.setdefault("vllm", {"starts": [], "pid": None, "exit": None})
        if "pid" in changes:
            vllm["starts"] = [*vllm.get("starts", []), time.time()]
            vllm["exit"] = None
        vllm.update(changes)
        write_state(path, state)
    except OSError:
        pass


def mark_swapping(path: str, model: str | None) -> None:
    """While another model starts in this one's place: phase "swapping", the watchdog disarmed. Never raises."""
    try:
        state = read_state(path)
        state["swapping"] = model
        write_state(path, state)
    except OSError:
        pass
