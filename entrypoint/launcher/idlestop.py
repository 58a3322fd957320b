"""Idle stop, the launcher's side: whether a forgotten pod may stop itself, and how (VL_IDLE_STOP).

A GPU pod bills by the second whether or not anyone uses it. With VL_IDLE_STOP=<minutes>, once vLLM
has served and no request has reached the bridge for that long, the bridge asks RunPod's REST API v2 to
stop the pod: `POST {RUNPOD_REST_URL}/pods/{RUNPOD_POD_ID}/action` with `{"action": "stop"}` and
`Authorization: Bearer $RUNPOD_API_KEY` (RunPod gives every pod its id and a pod-scoped key; the API's
shapes are runpodapi.py's). The plan travels to the bridge in state.json (contract.Observe), the key in
the bridge's environment only: never in a file, a log line or the status page. The bridge's side is
podstop.py. Stdlib only, like the launcher.
"""

from __future__ import annotations

import json
import re
from typing import Mapping

from ..contract import (DEFAULT_REST_URL, RUNPOD_KEY_VARIABLE, RUNPOD_POD_VARIABLE as POD_VARIABLE,
                        RUNPOD_URL_VARIABLE as URL_VARIABLE, IdleStop, minutes, runpod_base_url_problem, runpod_key)
from ..runpodapi import STOP_ACTION, pod_action_path
from .report import Decision, LaunchError
from .knobs import Settings

_POD_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _key_problem(key: str) -> str | None:
    for position, char in enumerate(key, 1):
        if not "\x21" <= char <= "\x7e":
            return (f"holds {'white space' if char.isspace() else 'a character that is not printable ASCII'} at "
                    f"character {position} of {len(key)}, which cannot go in an HTTP header")
    return None


def decide_idle_stop(settings: Settings, env: Mapping[str, str], bridge_mode: str) -> tuple[IdleStop | None, Decision]:
    after_min = settings.value("VL_IDLE_STOP")
    source = f"VL_IDLE_STOP from {settings.source('VL_IDLE_STOP')}"
    if after_min is None:
        return None, Decision("idle-stop", "off", f"{source}: the pod runs, and bills, until you stop it")
    shown = f"VL_IDLE_STOP={settings.by_name['VL_IDLE_STOP'].raw.strip()}"
    if bridge_mode != "keepalive":
        return None, Decision("idle-stop", f"off: warning: {shown} needs the keep-alive bridge",
                              "VL_BRIDGE=off: vLLM holds the exposed port, and nothing sees its requests")
    pod = env.get(POD_VARIABLE, "").strip()
    if not pod:
        return None, Decision("idle-stop", f"off: {shown} but {POD_VARIABLE} is unset (not on RunPod)",
                              f"RunPod sets {POD_VARIABLE} and {RUNPOD_KEY_VARIABLE} in every pod; elsewhere nothing "
                              "could stop this machine")
    if not _POD_ID.fullmatch(pod):
        raise LaunchError(subject=POD_VARIABLE, value=pod,
                          problem=f"{POD_VARIABLE}={pod!r} is not a RunPod pod id (letters, digits, _ and -), and "
                                  f"{shown} would put it in the stop request's URL",
                          fix=f"unset {POD_VARIABLE}, or set VL_IDLE_STOP=off.")
    key = runpod_key(env)
    if key is None:
        return None, Decision("idle-stop", f"off: warning: {shown} but {RUNPOD_KEY_VARIABLE} is unset",
                              f"RunPod gives every pod a pod-scoped key in {RUNPOD_KEY_VARIABLE}; without it the pod cannot "
                              "ask RunPod to stop it")
    problem = _key_problem(key)
    if problem:
        raise LaunchError(subject=RUNPOD_KEY_VARIABLE, value=None,  # a key: never shown
                          problem=f"{RUNPOD_KEY_VARIABLE} {problem} (needed by {shown})",
                          fix="set it to the key exactly, or set VL_IDLE_STOP=off.")
    base = env.get(URL_VARIABLE, "").strip()
    problem = runpod_base_url_problem(base) if base else None
    if problem:
        raise LaunchError(subject=URL_VARIABLE, value=base,
                          problem=f"{URL_VARIABLE}={base!r} (where {shown} sends the stop request) is not valid: "
                                  f"{problem}",
                          fix=f"Unset it for RunPod's own API ({DEFAULT_REST_URL}).")
    stop = IdleStop(after_min * 60.0, pod, f"{(base or DEFAULT_REST_URL).rstrip('/')}{pod_action_path(pod)}")
    return stop, Decision("idle-stop", f"after {minutes(stop.after_s)} without a request: POST {stop.stop_url} "
                          f"{json.dumps(STOP_ACTION)}",
                          f"{source}; the clock starts once vLLM serves, and any request but /health, /metrics, "
                          f"/ping, /load, /version and the status page resets it; the key is {RUNPOD_KEY_VARIABLE} "
                          "(never printed)")
