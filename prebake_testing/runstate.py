"""The launcher's run state for a bridge started without the launcher: state.json written by the launcher's own code.

The bridge learns every launcher decision from state.json (entrypoint/contract.py): the watchdog's seconds, the
journal's plan, the idle stop's plan and the image's identity. A test that runs the bridge alone writes the file
with `write_state` and gives the bridge the environment it returns, as the launcher does; since the decisions come
from the launcher's modules (knobs, observeplan, idlestop, marker, runstate), the file cannot drift from the real one.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Mapping, Sequence

from entrypoint.contract import RUN_DIR_VARIABLE, read_state
from entrypoint.launcher.knobs import resolve
from entrypoint.launcher.marker import read_marker
from entrypoint.launcher.observeplan import decide_observe
from entrypoint.launcher.report import LaunchError
from entrypoint.launcher.runstate import mark_swapping, update_vllm, write_start
from entrypoint.redact import Redactor

__all__ = ["write_state", "vllm_started", "vllm_exited", "swapping"]


def write_state(run_dir: str | os.PathLike, env: Mapping[str, str] | None = None, *,
                identity: Mapping[str, str] | None = None,
                argv: Sequence[str] = ("vllm", "serve", "stand-in")) -> dict[str, str]:
    """Write `run_dir`/state.json as the launcher does before it starts vLLM with `argv`, deciding from `env` as it
    would: VL_WATCHDOG, VL_JOURNAL and VL_JOURNAL_REPO (with HF_TOKEN), VL_IDLE_STOP (with RUNPOD_POD_ID,
    RUNPOD_API_KEY, RUNPOD_REST_URL). `identity`: the image's (the status page's "image"); by default the marker's
    that the launcher reads (VL_PREBAKED_MARKER), or none without one. A value the launcher refuses raises its
    LaunchError. Returns the bridge's environment: `env` and PREBAKE_RUN_DIR, as the launcher starts the bridge."""
    env = dict(env or {})
    try:
        marker = read_marker(env)
    except LaunchError:
        marker = None
    settings = resolve(env, marker.launch_defaults if marker else {})
    observe, decisions = decide_observe(settings, env, "keepalive")
    observe = dataclasses.replace(observe, run_dir=os.fspath(run_dir))
    if identity is None:
        identity = marker.identity if marker else {}
    write_start(observe, identity, [decision.as_json() for decision in decisions], list(argv), Redactor(env))
    return {**env, RUN_DIR_VARIABLE: observe.run_dir}


def _state_file(run_dir: str | os.PathLike) -> str:
    path = os.path.join(os.fspath(run_dir), "state.json")
    if not read_state(path):
        raise FileNotFoundError(f"{path}: no run state there; write_state(run_dir, ...) writes it first")
    return path


def vllm_started(run_dir: str | os.PathLike, pid: int, argv: Sequence[str] | None = None) -> None:
    """What the supervisor records as it starts vLLM (a restart makes the bridge wait for vLLM to serve again)."""
    update_vllm(_state_file(run_dir), pid=pid, **({"argv": list(argv)} if argv is not None else {}))


def vllm_exited(run_dir: str | os.PathLike, code: int, why: str) -> None:
    """What the supervisor records once vLLM has exited: the status page's phase turns "failed", with `why`."""
    update_vllm(_state_file(run_dir), pid=None, exit={"code": code, "at": time.time(), "why": why})


def swapping(run_dir: str | os.PathLike, model: str | None) -> None:
    """A swap to `model` under way (None: over): the page says "swapping" and the watchdog waits."""
    mark_swapping(_state_file(run_dir), model)
