"""vLLM and the keep-alive bridge side by side, under tini, ending together.

- vLLM exits: the bridge is stopped and the container exits with vLLM's code (128+N for signal N).
- The bridge exits on its own: vLLM is stopped and the container exits EXIT_BRIDGE, so a pod never
  looks alive while its exposed port answers nothing (RunPod then restarts it).
- SIGTERM/SIGINT/SIGHUP/SIGQUIT (docker stop reaches us through tini) go to both; SIGUSR1/SIGUSR2 go
  to vLLM. Each child runs in its own session, so a terminal's Ctrl-C reaches vLLM once, from here.
Stdlib only, like the rest of the launcher.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Mapping

from .bridgeplan import Bridge
from .errors import EXIT_HOST, EXIT_WATCHDOG

EXIT_BRIDGE = 5  # the keep-alive bridge died: the container stops rather than serve nothing
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
TO_VLLM_ONLY = (signal.SIGUSR1, signal.SIGUSR2)
BRIDGE_GRACE_S = 5.0
VLLM_GRACE_S = 30.0  # after a bridge death; `docker stop` has its own grace period and SIGKILL


def bridge_command(bridge: Bridge) -> list[str]:
    return [sys.executable, str(Path(__file__).with_name("bridge.py")), "--port", str(bridge.port),
            "--upstream", bridge.upstream, "--heartbeat", f"{bridge.heartbeat_s:g}"]


def exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


def describe(code: int) -> str:
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def _signal(pid: int, signum: int, group: bool = False) -> None:
    try:
        os.killpg(pid, signum) if group else os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _end(process: subprocess.Popen, grace: float, log: Callable[[str], None], name: str) -> None:
    """SIGTERM, then SIGKILL to its whole process group (vLLM's workers too) after `grace` seconds."""
    _signal(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        pid, status = os.waitpid(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return
        time.sleep(0.05)
    log(f"{name} still running {grace:g} s after SIGTERM: SIGKILL")
    _signal(process.pid, signal.SIGKILL, group=True)
    _, status = os.waitpid(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)


def supervise(vllm_argv: list[str], vllm_env: Mapping[str, str], bridge: Bridge, bridge_env: Mapping[str, str],
              log: Callable[[str], None], observer=None) -> int:
    """`observer` (serving/observer.py): captures vLLM's output and records its starts and exits."""
    children: dict[str, subprocess.Popen] = {}
    stopping = []

    def forward(signum, _frame) -> None:
        if signum in STOPS:
            stopping.append(signum)
        for name, child in children.items():
            if child.returncode is None and (name == "vllm" or signum in STOPS):
                _signal(child.pid, signum)

    for signum in STOPS + TO_VLLM_ONLY:
        signal.signal(signum, forward)
    try:
        children["vllm"] = subprocess.Popen(vllm_argv, env=dict(vllm_env), start_new_session=True,
                                            **(observer.popen_kwargs() if observer else {}))
    except OSError as err:
        log(f"error: cannot start {vllm_argv[0]!r}: {err}. The image's vLLM should be /opt/venv/bin/vllm, "
            "first on PATH.")
        return EXIT_HOST
    if observer:
        observer.started(children["vllm"])
    children["bridge"] = subprocess.Popen(bridge_command(bridge), env=dict(bridge_env), start_new_session=True)
    if stopping:  # a stop signal arrived while the children were starting
        forward(stopping[0], None)
    vllm, relay = children["vllm"], children["bridge"]
    while True:
        pid, status = os.wait()
        code = os.waitstatus_to_exitcode(status)
        if pid == vllm.pid:
            vllm.returncode = code
            log(f"vLLM exited with {describe(code)}; stopping the keep-alive bridge")
            if observer:
                observer.exited(exit_code(code), f"vLLM exited with {describe(code)}")
            if relay.returncode is None:
                _end(relay, BRIDGE_GRACE_S, log, "the keep-alive bridge")
            return exit_code(code)
        if pid == relay.pid:
            relay.returncode = code
            if stopping:
                continue  # asked to stop: wait for vLLM's own exit code
            if code == EXIT_WATCHDOG:
                log("watchdog: vLLM stopped answering its health check while serving (the bridge's lines above say "
                    f"for how long); stopping vLLM, and the container exits {EXIT_WATCHDOG} so that RunPod restarts it")
                _end(vllm, VLLM_GRACE_S, log, "vLLM")
                if observer:
                    observer.exited(EXIT_WATCHDOG, "watchdog: vLLM stopped answering /health while serving")
                return EXIT_WATCHDOG
            log(f"error: the keep-alive bridge on port {bridge.port} exited with {describe(code)}: nothing answers "
                "there any more, so vLLM is stopped and the container exits rather than look alive. Its log lines "
                "above say why; VL_BRIDGE=off lets vLLM bind the port itself.")
            _end(vllm, VLLM_GRACE_S, log, "vLLM")
            return EXIT_BRIDGE
