"""What the launcher knows and the bridge shows: the run folder, its state file, and the decisions about them.

The launcher writes `state.json` in the run folder before it starts vLLM (the image, its decisions,
vLLM's command) and the supervisor updates it as vLLM starts and exits; the bridge reads it for the
status page. One writer, replaced atomically, so a reader never sees half a file. The run folder
is on the volume when there is one (the cache root, caches.py), one folder per pod since a network
volume can be shared: a restarted container finds the previous run's state and log there.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import time
from dataclasses import dataclass
from typing import Mapping

from ..caches import cache_root
from ..knobs import Settings
from ..record import Decision
from .idlestop import IdleStop, decide_idle_stop
from .journal import Journal, decide_journal

STATE = "state.json"
LOG = "vllm.log"
RUN_DIR_VARIABLE = "PREBAKE_RUN_DIR"  # how the bridge finds the run folder


@dataclass(frozen=True)
class Observe:
    run_dir: str
    watchdog_s: int  # 0: off
    journal: Journal | None
    idle_stop: IdleStop | None = None  # VL_IDLE_STOP on RunPod (idlestop.py)

    @property
    def log_file(self) -> str:
        return os.path.join(self.run_dir, LOG)

    @property
    def state_file(self) -> str:
        return os.path.join(self.run_dir, STATE)

    def as_json(self) -> dict:
        return {"run_dir": self.run_dir, "log_file": self.log_file, "watchdog_s": self.watchdog_s,
                "journal": self.journal.as_json() if self.journal else None,
                "idle_stop": self.idle_stop.as_json() if self.idle_stop else None}


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


def read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: str, data: dict) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".state-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
    os.replace(temporary, path)


def previous_run(state: dict) -> dict | None:
    """What the last run of this pod left: when it ran, how vLLM ended, where its log is now."""
    if not state:
        return None
    vllm = state.get("vllm") or {}
    return {"started_at": state.get("started_at"), "image": (state.get("identity") or {}).get("revision"),
            "exit": vllm.get("exit"), "log_file": LOG + ".1"}


def write_start(observe: Observe, identity: Mapping[str, str], decisions: list[dict], argv: list[str]) -> None:
    """The launcher's part, before vLLM starts (OSError: the caller reports it and serves without a status file)."""
    _write(observe.state_file, {
        "identity": dict(identity), "decisions": decisions, "argv": argv, "started_at": time.time(),
        "observe": observe.as_json(), "previous_run": previous_run(read(observe.state_file)),
        "vllm": {"starts": [], "pid": None, "exit": None}, "swapping": None})


def update_vllm(path: str, argv: list[str] | None = None, **changes) -> None:
    """The supervisor's part: pid and start time on each start, {code, at, why} on exit; the argv (redacted)
    of the vLLM it started, which a swap changes. Never raises."""
    try:
        state = read(path)
        if argv is not None:
            state["argv"] = argv
        vllm = state.setdefault("vllm", {"starts": [], "pid": None, "exit": None})
        if "pid" in changes:
            vllm["starts"] = [*vllm.get("starts", []), time.time()]
            vllm["exit"] = None
        vllm.update(changes)
        _write(path, state)
    except OSError:
        pass


def mark_swapping(path: str, model: str | None) -> None:
    """While another model starts in this one's place: phase "swapping", the watchdog disarmed. Never raises."""
    try:
        state = read(path)
        state["swapping"] = model
        _write(path, state)
    except OSError:
        pass
