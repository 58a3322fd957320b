"""Idle stop, the bridge's side: count the requests, and ask RunPod to stop a pod nobody uses.

What counts as activity: every request that reaches vLLM or waits for it, from the moment it arrives
until its answer ends (an open stream, a request waiting for a swap). Not `/health`, `/metrics` or the
status page (health checks and scrapers poll them), and not a request refused for a missing key (a
scanner must not keep a pod alive). The pod is also awake while vLLM is not serving (loading, a
restart, a swap). The clock starts when vLLM first serves and restarts after each request.

When it runs out: `POST <stop_url>` (RunPod v2's `/pods/{id}/action`) with `{"action": "stop"}` and
`Authorization: Bearer $RUNPOD_API_KEY`, retried with backoff while it fails (a 429 waits at least its
Retry-After; a redirect is a failure, never followed), one log line per attempt (redacted: never the key).
A request that comes in meanwhile cancels the stop: activity is checked right before every attempt. Until
RunPod stops the container the pod keeps serving; if RunPod accepted but the pod is still up a whole idle
period later, it asks again. The decision is the launcher's (launcher/idlestop.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Mapping

import aiohttp

from ..contract import IDLE_STOP_RETRY_FIRST_S, RUNPOD_KEY_VARIABLE, minutes, runpod_key
from ..logline import utc_stamp
from ..runpodapi import STOP_ACTION, problem_text, retry_after_s
from ..safetext import safe
from .auth import ACCESS, Access

# Polled by health checks, scrapers and dashboards, never by a person at work: vLLM 0.27.1's own metrics leave
# out the same paths (serve/instrumentator/metrics.py; /ping is SageMaker's health check, /load the server's
# load). The status page is answered before the relay and never gets here.
NOT_ACTIVITY = frozenset({"/health", "/metrics", "/ping", "/load", "/version"})
WARN_AHEAD_S = 60.0  # the log line announcing the stop (half way for an idle time under 2 minutes)
RETRY_MAX_S = 300.0  # backoff between attempts: the plan's first (2 s), doubled up to this
CALL_TIMEOUT_S = 30.0
TICK_MAX_S = 1.0


class Activity:
    """Requests in flight, and when the last one came or went (monotonic)."""

    def __init__(self) -> None:
        self.running = 0
        self.last = time.monotonic()

    @staticmethod
    def counts(path: str, access: Access) -> bool:
        return access.needs_key and access.authorized and path not in NOT_ACTIVITY

    def enter(self) -> None:
        self.running += 1
        self.last = time.monotonic()

    def leave(self) -> None:
        self.running -= 1
        self.last = time.monotonic()


class CountActivity:
    """The ASGI layer that counts a request as activity from its arrival until its answer ends (auth.KeyCheck's
    decision says whether it counts)."""

    def __init__(self, app, activity: Activity) -> None:
        self.app, self.activity = app, activity

    async def __call__(self, scope, receive, send) -> None:
        if not self.activity.counts(scope["path"], scope[ACCESS]):
            await self.app(scope, receive, send)
            return
        self.activity.enter()  # keeps the pod awake until its answer ends (VL_IDLE_STOP)
        try:
            await self.app(scope, receive, send)
        finally:
            self.activity.leave()


class PodStopper:
    """`awake()` (the monitor's): why the pod must stay up now regardless of requests, or None."""

    def __init__(self, plan: Mapping, environ: Mapping[str, str], activity: Activity,
                 awake: Callable[[], str | None], log: Callable[[str], None], redact: Callable[[str], str]) -> None:
        self.after_s = float(plan["after_s"])
        self.pod_id, self.stop_url = str(plan["pod_id"]), str(plan["stop_url"])
        self.retry_first_s = _retry_first_s(plan.get("retry_first_s"))
        self.key = runpod_key(environ) or ""
        self.activity, self.awake, self.log, self.redact = activity, awake, log, redact
        self.since: float | None = None  # the idle clock's start (monotonic); None: not running
        self.awake_seen = float("-inf")  # when something last kept the pod awake (monotonic)
        self.why_awake: str | None = "vLLM has not served yet"
        self.warned_for: float | None = None  # the idle spell (its `since`) the stop was announced for
        self.attempts = 0
        self.last_error: str | None = None
        self.requested_at: float | None = None  # wall time RunPod accepted a stop
        self.tick_s = min(TICK_MAX_S, max(0.05, self.after_s / 50))
        self.warn_at = self.after_s - min(WARN_AHEAD_S, self.after_s / 2)

    # --- the clock -------------------------------------------------------------------------------
    def idle_s(self, now: float | None = None) -> float | None:
        """Seconds idle now, or None while something keeps the pod awake."""
        now = time.monotonic() if now is None else now
        reason = self.awake() or (f"{self.activity.running} request(s) running" if self.activity.running else None)
        if reason:
            self.why_awake, self.since, self.awake_seen = reason, None, now
            return None
        self.why_awake = None
        if self.since is None:  # awake until a moment ago: the last request's end, if that is what ended it
            self.since = self.activity.last if self.activity.last > self.awake_seen else now
        self.since = max(self.since, self.activity.last)
        return now - self.since

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - a bug here must cost a log line, never the pod or the stop
                self.log(f"idle stop: unexpected {type(err).__name__}: {self.redact(str(err))}; going on")
                await asyncio.sleep(TICK_MAX_S)

    async def step(self) -> None:
        """One look at the clock: announce, stop, or wait a tick."""
        idle = self.idle_s()
        if self.warned_for is not None and (idle is None or self.since != self.warned_for):
            self.log(f"idle stop: {self.why_awake or 'a request came in'}; the pod stays up")
            self.warned_for = None
        if idle is not None and self.warned_for is None and idle >= self.warn_at:
            self.warned_for = self.since  # once per idle spell
            left = max(0.0, self.after_s - idle)
            self.log(f"idle stop: no request for {_seconds(idle)}; unless one comes, this pod asks RunPod to stop "
                     f"it in {_seconds(left)}, at {utc_stamp(time.time() + left)} (VL_IDLE_STOP={self.after_s / 60:g})")
        if idle is not None and idle >= self.after_s:
            if await self.stop():
                self.since = time.monotonic()  # still up a whole period later: ask again
            self.warned_for = None
            return
        await asyncio.sleep(self.tick_s)

    def idle_again(self, since: float) -> bool:
        """Still idle, with no request since `since` (monotonic)?"""
        return self.idle_s() is not None and self.activity.last <= since

    # --- RunPod's API ----------------------------------------------------------------------------
    async def stop(self) -> bool:
        """Ask until RunPod accepts (True), or until a request comes in (False): activity is looked at right
        before every attempt, so a request that came during a backoff calls the stop off."""
        decided, delay = time.monotonic(), self.retry_first_s
        headers = {"Authorization": f"Bearer {self.key}", "Accept": "application/json"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT_S)) as session:
            while True:
                if not self.idle_again(decided):
                    self.log(f"idle stop: {self.why_awake or 'a request came in'}; not stopping the pod")
                    return False
                began, wait = time.monotonic(), None
                try:  # never along a redirect: the key would go with it, and aiohttp would turn the POST into a GET
                    async with session.post(self.stop_url, headers=headers, json=STOP_ACTION,
                                            allow_redirects=False) as answer:
                        raw = await answer.content.read(4096)
                        status = answer.status
                        location = answer.headers.get("Location")
                        wait = retry_after_s(answer.headers.get("Retry-After")) if status == 429 else None
                    problem = None if 200 <= status < 300 else \
                        f"RunPod answered {status}, a redirect to {location!r}, not followed" if 300 <= status < 400 \
                        else f"RunPod answered {status} ({problem_text(raw, 200, self.redact)})"
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as err:
                    status = None
                    problem = f"the call failed ({type(err).__name__}: {safe(err, 200, self.redact) or 'no answer'})"
                took = time.monotonic() - began
                self.attempts += 1  # counted once answered: the page shows an attempt with its outcome
                if problem is None:
                    self.requested_at, self.last_error = time.time(), None
                    self.log(self.redact(
                        f"idle stop: no request for {minutes(self.after_s)}: RunPod accepted the stop of pod "
                        f"{self.pod_id} (POST {self.stop_url}, attempt {self.attempts}, {status} in {took:.1f} s); "
                        "the pod serves on until RunPod stops it"))
                    return True
                pause = max(delay, wait or 0)  # a 429 says how long to wait: never sooner
                self.last_error = self.redact(problem)
                self.log(self.redact(
                    f"idle stop: asking RunPod to stop pod {self.pod_id} (POST {self.stop_url}), attempt "
                    f"{self.attempts}: {problem}; the pod serves on, next attempt in {pause:g} s"
                    + (f" (Retry-After: {wait} s)" if wait is not None else "")
                    + (f" (is {RUNPOD_KEY_VARIABLE} this pod's key?)" if status in (401, 403) else "")))
                deadline = time.monotonic() + pause
                while time.monotonic() < deadline:
                    if not self.idle_again(decided):
                        break  # said at the top of the loop
                    await asyncio.sleep(min(self.tick_s, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, RETRY_MAX_S)

    # --- what the status page says ---------------------------------------------------------------
    def snapshot(self) -> dict:
        idle = self.idle_s()
        stops_at = None if idle is None else utc_stamp(time.time() + max(0.0, self.after_s - idle))
        return {"after_s": self.after_s, "idle_s": None if idle is None else round(idle, 1),
                "awake": self.why_awake, "stops_at": stops_at, "attempts": self.attempts,
                "last_error": self.last_error,
                "stop_requested_at": utc_stamp(self.requested_at) if self.requested_at else None}


def _retry_first_s(value: object) -> float:
    """The plan's first backoff: a number of seconds in (0, RETRY_MAX_S], or the default."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= RETRY_MAX_S:
        return float(value)
    return IDLE_STOP_RETRY_FIRST_S


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
