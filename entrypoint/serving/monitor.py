"""The bridge's view of vLLM, kept current in the background for the status page (status.py): vLLM's
health and the watchdog, its log (the phase, the last lines), its queue figures, the GPUs' memory, the
launcher's run state, and the journal's uploads.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from typing import Awaitable, Callable, Mapping

import aiohttp

from ..contract import (EXIT_WATCHDOG, HF_DEFAULT_ENDPOINT, LOG, RUN_DIR_VARIABLE, STATE,
                        WATCHDOG_VARIABLE, Journal, hf_token, read_state)
from .. import nvidiasmi
from . import gpus, metrics
from .auth import api_key
from .health import Health
from .phases import MEANING, LogPhase
from .podstop import Activity, PodStopper
from ..redact import Redactor
from .uploader import Uploader
from ..vllmlog import Follower
from .watchdog import Tracker

KEPT_LINES = 500  # of vLLM's log, for the page's ?lines=N
HEALTH_POLL_S = 1.0
METRICS_EVERY_S = 5.0
RATE_WINDOW = 7  # samples: throughput over the last ~30 s
GPU_MAX_AGE_S = 5.0
DEFAULT_WATCHDOG_S = 90


def _seconds(value: object, default: int) -> int:
    return value if isinstance(value, int) and value >= 0 else default



def _idle_stop_from_env(environ: Mapping[str, str]):
    """The bridge run without the launcher's state file: the launcher's decision, from the bridge's environment."""
    from ..launcher.report import LaunchError
    from ..launcher.idlestop import decide_idle_stop
    from ..launcher.knobs import resolve

    try:
        return decide_idle_stop(resolve(environ, {}), environ, "keepalive")[0]
    except (LaunchError, KeyError):
        return None


class Monitor:
    """Everything the page shows, kept current by two background tasks (health, log)."""

    def __init__(self, environ: Mapping[str, str], upstream: str, log: Callable[[str], None],
                 health: Health | None = None) -> None:
        self.upstream, self.log = upstream, log
        self.health = health or Health(upstream)  # vLLM's /health: this monitor polls it for everyone
        self.redact = Redactor(environ)
        self.key = api_key(environ)
        self.nvidia_smi = nvidiasmi.path(environ)
        self.run_dir = environ.get(RUN_DIR_VARIABLE) or ""
        self.state: dict = read_state(os.path.join(self.run_dir, STATE)) if self.run_dir else {}
        self.state_version: tuple[int, int] | None = None
        observe = self.state.get("observe") or {}
        self.watchdog_s = _seconds(observe.get("watchdog_s"), self._env_watchdog(environ))
        self.identity = dict(self.state.get("identity") or self._marker_identity(environ))
        self.began = time.time()
        self.log_phase = LogPhase()
        self.phase_since = self.began
        self.tail: deque[str] = deque(maxlen=KEPT_LINES)
        self.follower = Follower(os.path.join(self.run_dir, LOG)) if self.run_dir else None
        self.starts = 0
        self.healthy = False
        self.served = False  # /health answered since vLLM's latest start: the watchdog is armed
        self.last_ok: float | None = None
        self.health_problem: str | None = None
        self.failure: str | None = None
        self.samples: deque[metrics.Sample] = deque(maxlen=RATE_WINDOW)
        self.gpus: list[dict] = []
        self.gpus_problem: str | None = None
        self.gpus_at = 0.0
        self.gpu_lock = asyncio.Lock()
        self.tracker = Tracker()
        self.uploader = self._uploader(observe.get("journal"), environ)
        self.activity = Activity()  # requests that keep the pod awake (status.py counts them)
        self.idle = self._idle_stopper(observe, environ)
        self.tasks: list[asyncio.Task] = []
        self.session: aiohttp.ClientSession | None = None
        self.exit_code = 0
        self.request_exit: Callable[[], None] = lambda: None
        self.report: Callable[[], Awaitable[str]] | None = None  # the journal's text (status.py sets it)

    @staticmethod
    def _env_watchdog(environ: Mapping[str, str]) -> int:
        raw = environ.get(WATCHDOG_VARIABLE, "")  # only without the launcher's state file (the bridge run alone)
        return int(raw) if raw.isascii() and raw.isdigit() else DEFAULT_WATCHDOG_S

    @staticmethod
    def _marker_identity(environ: Mapping[str, str]) -> dict:
        from ..launcher.marker import read_marker  # the bridge run alone: the image's identity as the launcher reads it

        try:
            return dict(read_marker(environ).identity)
        except Exception:  # noqa: BLE001 - the page says "unknown" rather than fail
            return {}

    def _uploader(self, plan: object, environ: Mapping[str, str]) -> Uploader | None:
        secret = hf_token(environ)
        if not isinstance(plan, dict) or not secret:
            return None
        journal = Journal.from_json(plan)
        return Uploader(journal, secret, self.log, environ.get("HF_ENDPOINT") or HF_DEFAULT_ENDPOINT)

    def _idle_stopper(self, observe: dict, environ: Mapping[str, str]) -> PodStopper | None:
        if "idle_stop" in observe:  # the launcher decided (contract.Observe)
            plan = observe["idle_stop"]
        else:  # the bridge run alone: the same decision from its environment
            found = _idle_stop_from_env(environ)
            plan = found.as_json() if found else None
        if not isinstance(plan, dict):
            return None
        return PodStopper(plan, environ, self.activity, self.awake, self.log, self.redact)

    def awake(self) -> str | None:
        """Why the pod must not stop now whatever the requests: vLLM not serving (yet), a swap, an exit."""
        if self.failure:
            return "the watchdog is ending this container"
        if self.state.get("swapping"):
            return f"swapping to {self.state['swapping']}"
        if self.vllm_exit():
            return "vLLM exited"
        if not self.served:
            return "vLLM is not serving yet"
        return None

    # --- background ------------------------------------------------------------------------------
    def start(self) -> None:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        self.tasks = [asyncio.ensure_future(self.watch_health()), asyncio.ensure_future(self.watch_log())]
        if self.uploader and self.report:
            self.tasks.append(asyncio.ensure_future(self.uploader.run(self.report, lambda: self.healthy)))
        if self.idle:
            self.tasks.append(asyncio.ensure_future(self.idle.run()))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.uploader and self.report and self.failure is None:
            self.refresh_state()
            if self.vllm_exit():  # vLLM died: the supervisor is stopping us; one last upload, briefly
                await self.uploader.push(await self.report(), timeout=3.0)
        await self.health.close()
        if self.session:
            await self.session.close()

    def refresh_state(self) -> None:
        path = os.path.join(self.run_dir, STATE)
        try:
            found = os.stat(path)
        except OSError:
            return
        version = (found.st_ino, found.st_mtime_ns)  # each write replaces the file: a new inode
        if version == self.state_version:
            return
        self.state_version, self.state = version, read_state(path) or self.state
        starts = len((self.state.get("vllm") or {}).get("starts") or [])
        if starts > self.starts and self.starts:
            self.served = self.healthy = False  # a restarted vLLM: disarmed until it serves again
            self.restart_log_phase()
        self.starts = starts

    def restart_log_phase(self) -> None:
        self.log_phase = LogPhase(self.log_phase.markers)
        self.phase_since = time.time()

    async def watch_log(self) -> None:
        while True:
            self.refresh_state()
            if self.follower:
                for line in self.follower.lines():
                    self.tail.append(line)
                    if self.log_phase.feed(line):
                        self.phase_since = time.time()
            await asyncio.sleep(0.5)

    async def watch_health(self) -> None:
        probe_s = float(max(1, min(5, self.watchdog_s or 5)))
        next_metrics = 0.0
        while True:
            began = time.monotonic()
            ok = await self.health.check(probe_s)
            problem = self.health.problem
            now = time.monotonic()
            if ok:
                if not self.served:
                    self.phase_since = time.time()
                self.healthy = self.served = True
                self.last_ok, self.health_problem = now, None
                if now >= next_metrics:
                    next_metrics = now + METRICS_EVERY_S
                    await self.read_metrics()
            else:
                self.healthy, self.health_problem = False, problem
                if self.watchdog_due(now):
                    await self.fire(problem, now - self.last_ok)
                    return
            await asyncio.sleep(max(0.0, HEALTH_POLL_S - (time.monotonic() - began)))

    def watchdog_due(self, now: float) -> bool:
        return bool(self.watchdog_s) and self.served and self.last_ok is not None and \
            now - self.last_ok >= self.watchdog_s and not self.state.get("swapping")

    async def fire(self, problem: str, silent_s: float) -> None:
        self.failure = (f"watchdog: vLLM was serving, then its health check failed for {silent_s:.0f} s "
                        f"(VL_WATCHDOG={self.watchdog_s}; last: {problem}); the container exits {EXIT_WATCHDOG} "
                        "so that RunPod restarts it")
        self.phase_since = time.time()
        self.log(self.failure)
        waiting = await self.tracker.fail_all("vLLM stopped answering on this pod (its health check failed for "
                                              f"{silent_s:.0f} s); the pod is restarting: retry in a few minutes")
        if waiting:
            self.log(f"watchdog: {waiting} waiting request(s) answered with an error")
        if self.uploader and self.report:
            await self.uploader.push(await self.report(), timeout=10.0)
        self.exit_code = EXIT_WATCHDOG
        self.request_exit()

    async def read_metrics(self) -> None:
        try:
            async with self.session.get(self.upstream + "/metrics", timeout=aiohttp.ClientTimeout(total=5)) as answer:
                text = await answer.text() if answer.status == 200 else ""
        except (aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError):
            return
        found = metrics.sample(text, time.monotonic())
        if found:
            if self.samples and found.prompt_tokens < self.samples[-1].prompt_tokens:
                self.samples.clear()  # counters restarted with vLLM
            self.samples.append(found)

    async def refresh_gpus(self) -> None:
        async with self.gpu_lock:
            if time.monotonic() - self.gpus_at < GPU_MAX_AGE_S:
                return
            self.gpus, self.gpus_problem = await gpus.query(self.nvidia_smi)
            self.gpus_at = time.monotonic()

    # --- what the page says ----------------------------------------------------------------------
    def vllm_exit(self) -> dict | None:
        found = (self.state.get("vllm") or {}).get("exit")
        return found if isinstance(found, dict) else None

    def phase(self, full: bool = True) -> tuple[str, str]:
        """(phase, why); `why` quotes vLLM's log only when `full`."""
        if self.failure:
            return "failed", self.failure
        if self.state.get("swapping"):  # before the exit: stopping the old vLLM is part of a swap
            return "swapping", f"starting {self.state['swapping']}"
        ended = self.vllm_exit()
        if ended:
            return "failed", str(ended.get("why") or "vLLM exited")
        if self.served:
            if self.healthy:
                return "serving", MEANING["serving"]
            failing = time.monotonic() - (self.last_ok or time.monotonic())
            watchdog = f"; the watchdog restarts the pod after {self.watchdog_s} s" if self.watchdog_s else ""
            return "serving", f"warning: {self.health_problem} for {failing:.0f} s{watchdog}"
        phase = self.log_phase.phase
        return phase, (f"{MEANING[phase]}; vLLM's last milestone: {self.log_phase.line}"
                       if self.log_phase.line and full else MEANING[phase])
