"""The bridge's view of vLLM, kept current in the background for the status page (status.py): vLLM's
health (and when the watchdog is due: watchdog.py acts on it), its log (the phase, the last lines), its queue
figures, the GPUs' memory, and the launcher's run state.

All the bridge knows of the launcher's decisions comes from the state file (contract.STATE in the run folder):
`observe` (the watchdog's seconds, the journal's plan, the idle stop's plan: Duties) and `identity` (the image's
marker). A bridge run without one (by hand, or a test) has the watchdog's default, and no journal or idle stop.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping

import aiohttp

from ..contract import LOG, RUN_DIR_VARIABLE, STATE, read_state
from .. import nvidiasmi
from . import gpus, metrics
from .auth import api_key
from .health import Health
from .startphase import MEANING, LogPhase
from ..redact import Redactor
from ..vllmlog import Follower

KEPT_LINES = 500  # of vLLM's log, for the page's ?lines=N
HEALTH_POLL_S = 1.0
METRICS_EVERY_S = 5.0
RATE_WINDOW = 7  # samples: throughput over the last ~30 s
GPU_MAX_AGE_S = 5.0
DEFAULT_WATCHDOG_S = 90  # the launcher's default for VL_WATCHDOG, for a bridge run without its state file


@dataclass(frozen=True)
class Duties:
    """What the launcher asked the bridge to do beside relaying (state.json's "observe", contract.Observe)."""
    watchdog_s: int
    journal: dict | None  # contract.Journal's JSON (journal.Uploader.planned)
    idle_stop: dict | None  # contract.IdleStop's JSON (podstop.PodStopper)

    @classmethod
    def of(cls, state: Mapping) -> Duties:
        observe = state.get("observe") if isinstance(state.get("observe"), dict) else {}
        watchdog = observe.get("watchdog_s")
        plan = {name: observe.get(name) if isinstance(observe.get(name), dict) else None
                for name in ("journal", "idle_stop")}
        return cls(watchdog if isinstance(watchdog, int) and watchdog >= 0 else DEFAULT_WATCHDOG_S, **plan)


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
        self.duties = Duties.of(self.state)
        self.watchdog_s = self.duties.watchdog_s
        self.identity = dict(self.state.get("identity") or {})  # the image's marker, as the launcher read it
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
        self.session: aiohttp.ClientSession | None = None

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

    # --- background: watch_log and watch_health run for the bridge's lifetime (app.py) ------------------
    def open(self) -> None:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))

    async def close(self) -> None:
        await self.health.close()
        if self.session:
            await self.session.close()

    def fail(self, failure: str) -> None:
        """The watchdog gave up on vLLM (watchdog.py): the page says so from now on."""
        self.failure = failure
        self.phase_since = time.time()
        self.log(failure)

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
        self.log_phase = LogPhase(self.log_phase.phase_lines)
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

    async def watch_health(self) -> tuple[str, float]:
        """Poll vLLM's /health; returns (its last problem, seconds since it last answered) when the watchdog is due."""
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
                    return problem, now - self.last_ok
            await asyncio.sleep(max(0.0, HEALTH_POLL_S - (time.monotonic() - began)))

    def watchdog_due(self, now: float) -> bool:
        return bool(self.watchdog_s) and self.served and self.last_ok is not None and \
            now - self.last_ok >= self.watchdog_s and not self.state.get("swapping")

    async def read_metrics(self) -> None:
        try:
            async with self.session.get(self.health.base + "/metrics", timeout=aiohttp.ClientTimeout(total=5)) as answer:
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
