"""The launcher run as a container runs it, with a stand-in `vllm` on PATH and the bridge on a free port.

  Pod  phased_vllm.py as `vllm`: it starts phase by phase as the test allows, then serves (status page, journal,
       idle stop, the previous run)
  Run  a `vllm` that records the signals it gets, exits with a code, or serves the stand-in (FAKE_VLLM_MODE)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .hosts import LAUNCH, Launcher
from .net import free_port, get, wait_for_port

PHASED_COMMAND = f"'{sys.executable}' -m prebake_testing.phased_vllm"
KEY = "pod-key-7f3a9c2e"  # a Pod's VLLM_API_KEY where a test sets one
IDLE_MIN = "0.05"  # VL_IDLE_STOP in minutes, short enough for a test: 3 s
IDLE_S = 3.0


class Pod:
    """The launcher, as a container runs it, with phased_vllm.py as `vllm` and a volume at `volume`."""

    def __init__(self, tmp_path: Path, env: dict | None = None, mode: str = "serve",
                 args: list[str | bytes] = ()) -> None:
        self.launcher = Launcher(tmp_path) if not (tmp_path / "cuda-13.0").exists() else self._reuse(tmp_path)
        bin_dir = tmp_path / "fake-bin"
        bin_dir.mkdir(exist_ok=True)
        script = bin_dir / "vllm"
        script.write_text(f"#!/bin/sh\nexec {PHASED_COMMAND} \"$@\"\n")
        script.chmod(0o755)
        self.control = tmp_path / f"control-{time.monotonic_ns()}"
        self.control.mkdir()
        self.volume = tmp_path / "volume"
        self.port, self.internal = free_port(), free_port()
        full = self.launcher.base_env("h200_580")
        full.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "PHASED_CONTROL": str(self.control),
                     "PHASED_MODE": mode, "VL_PORT": str(self.port), "VL_INTERNAL_PORT": str(self.internal),
                     "VL_CACHE_ROOT": str(self.volume), "RUNPOD_POD_ID": "testpod", "VL_HEARTBEAT": "0.5",
                     **(env or {})})
        self.env = full
        self.process = subprocess.Popen([sys.executable, str(LAUNCH), *args], env=full, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        try:
            wait_for_port(self.port, self.process, "the bridge")
        except BaseException:  # nobody holds a pod that did not start: stop its launcher (and so its children)
            self.stop()
            raise
        self.run_dir = self.volume / "prebake" / "testpod"

    @staticmethod
    def _reuse(tmp_path: Path) -> Launcher:
        launcher = Launcher.__new__(Launcher)
        launcher.tmp, launcher.compat_dir = tmp_path, tmp_path / "cuda-13.0" / "compat"
        launcher.marker, launcher.hf_home = tmp_path / "image_prebaked", tmp_path / "hf"
        return launcher

    def go(self, step: int) -> None:
        (self.control / f"go-{step}").touch()

    def status(self, key: str | None = KEY, path: str = "/prebake/status") -> tuple[int, object]:
        status, _, body = get(self.port, path, {"authorization": f"Bearer {key}"} if key else None)
        return status, body

    def wait_phase(self, phase: str, key: str | None = KEY, timeout: float = 20) -> dict:
        deadline, seen = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            code, seen = self.status(key)
            # The page and the relay each poll vLLM's /health: "serving" may come a second before the relay's 200.
            relaying = phase != "serving" or get(self.port, "/health", {"authorization": f"Bearer {KEY}"})[0] == 200
            if code == 200 and seen["phase"] == phase and relaying:
                return seen
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"phase {phase!r} never shown: {seen}\n{self.stop()[1][-3000:]}")

    def stop(self, timeout: float = 20) -> tuple[int, str, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        return self.process.returncode, out, err

    def finish(self, timeout: float = 30) -> tuple[int, str, str]:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            raise AssertionError(f"the launcher did not exit:\n{err[-3000:]}")
        return self.process.returncode, out, err


FAKE_VLLM = """#!{python}
# Stand-in `vllm`: records the signals it gets; FAKE_VLLM_MODE=serve runs the stand-in vLLM server.
import os, signal, socket, sys, time
record = os.environ["FAKE_VLLM_RECORD"]
def note(text):
    with open(record, "a") as f:
        f.write(text + "\\n")
note("started " + " ".join(sys.argv[1:]))
mode = os.environ.get("FAKE_VLLM_MODE", "wait")
if mode == "serve":
    os.execv(sys.executable, [sys.executable, "-m", "prebake_testing.standin", *sys.argv[1:]])
if mode.startswith("exit"):  # once the bridge listens (if there is one): it is running when vLLM exits
    port, deadline = os.environ.get("FAKE_VLLM_BRIDGE_PORT"), time.monotonic() + 10
    while port and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", int(port)), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    sys.exit(int(mode[4:]))
def on_signal(signum, frame):
    note(signal.Signals(signum).name)
    if signum == signal.SIGTERM:
        sys.exit(0)
for s in (signal.SIGTERM, signal.SIGUSR1):
    signal.signal(s, on_signal)
while True:
    time.sleep(0.1)
"""


class Run:
    def __init__(self, launcher: Launcher, tmp_path: Path, mode: str, env: dict | None = None,
                 args: list[str] = (), profile: str = "h200_580") -> None:
        bin_dir = tmp_path / "fake-bin"
        bin_dir.mkdir(exist_ok=True)
        script = bin_dir / "vllm"
        script.write_text(FAKE_VLLM.format(python=sys.executable))
        script.chmod(0o755)
        self.record = tmp_path / "vllm-record.txt"
        self.port, self.internal = free_port(), free_port()
        full = launcher.base_env(profile)
        full.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_VLLM_RECORD": str(self.record),
                     "FAKE_VLLM_MODE": mode, "VL_PORT": str(self.port), "VL_INTERNAL_PORT": str(self.internal),
                     "FAKE_VLLM_BRIDGE_PORT": "" if (env or {}).get("VL_BRIDGE") == "off" else str(self.port),
                     "VL_HEARTBEAT": "0.5", **(env or {})})
        self.process = subprocess.Popen([sys.executable, str(LAUNCH), *args], env=full, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)

    def lines(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def wait_for(self, predicate, what: str, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        self.process.kill()
        raise AssertionError(f"{what}: {self.lines()}\n{self.process.communicate()[1]}")

    def finish(self, timeout: float = 15) -> tuple[int, str]:
        try:
            _, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("the launcher did not exit: " + self.process.communicate()[1])
        return self.process.returncode, err

    def stop(self, timeout: float = 20) -> tuple[int, str]:
        """As a container's stop: SIGTERM, and the launcher stops vLLM and the bridge (a SIGKILL of the launcher
        alone would leave both running); SIGKILL only if it has not exited within `timeout`."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return self.process.returncode, err

    def bridge_pid(self) -> int:
        out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(self.process.pid)], capture_output=True,
                             text=True).stdout
        return int(next(line.split()[0] for line in out.splitlines() if "bridge.py" in line))
