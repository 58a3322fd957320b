"""The watchdog: when vLLM, once serving, fails its health check for VL_WATCHDOG seconds, the bridge answers every
request still waiting with an error in its API's own form (instead of heartbeats until its own client times out),
uploads the journal once more, and exits EXIT_WATCHDOG so that RunPod restarts the container.

Every relayed request runs inside `Tracking`, which gives it its Response (response.py: the one record of what the
client was sent) and keeps it in the Tracker while it runs; the watchdog fails each through that same Response.
The monitor (monitor.py) says when it is due; `Watchdog` does the rest.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from ..contract import EXIT_WATCHDOG
from .api import UpstreamError
from .response import Response

RESPONSE = "prebake.response"  # the scope's key for the request's Response, which the relay writes through


class Flight:
    """One relayed request: its Response and the task that answers it."""

    __slots__ = ("response", "task", "killed")

    def __init__(self, response: Response) -> None:
        self.response = response
        self.task: asyncio.Task | None = None
        self.killed: str | None = None


class Tracker:
    """The requests being answered now, for the watchdog's last word."""

    def __init__(self) -> None:
        self.flights: set[Flight] = set()
        self.failed: str | None = None

    async def fail_all(self, message: str, timeout: float = 5.0) -> int:
        """Cancel every relayed request and answer it with `message`; how many there were."""
        self.failed = message
        flights = list(self.flights)
        for flight in flights:
            flight.killed = message
            flight.response.silence()  # what the relay writes while it is cancelled never reaches the client
            flight.task.cancel()
        deadline = asyncio.get_running_loop().time() + timeout
        while self.flights and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        return len(flights)


def watchdog_error(message: str) -> UpstreamError:
    return UpstreamError.of_bridge(message, 503)


class Tracking:
    """The ASGI layer in front of the relay: the request's Response goes in its scope, the request in the Tracker."""

    def __init__(self, app, tracker: Tracker, heartbeat_s: float) -> None:
        self.app, self.tracker, self.heartbeat_s = app, tracker, heartbeat_s

    async def __call__(self, scope, receive, send) -> None:
        response = Response.for_request(send, scope["method"], scope["path"], self.heartbeat_s)
        if self.tracker.failed:  # between the watchdog firing and the bridge's exit
            await response.fail(watchdog_error(self.tracker.failed))
            return
        flight = Flight(response)
        scope[RESPONSE] = response  # the request's own scope (auth.KeyCheck writes its decision the same way)
        flight.task = asyncio.ensure_future(self.app(scope, receive, send))
        self.tracker.flights.add(flight)
        try:
            await asyncio.wait({flight.task})
        except asyncio.CancelledError:
            # uvicorn's graceful shutdown ending: the relay answers in its own way (the bridge's shutdown
            # error) before this returns and uvicorn closes the connection.
            flight.task.cancel()
            await asyncio.wait({flight.task})
            if flight.task.cancelled():
                raise
            return  # the relay answered and returned, as uvicorn expects of an app it cancels
        finally:
            if not flight.killed:
                self.tracker.flights.discard(flight)
        if flight.killed:
            try:
                await response.fail_silenced(watchdog_error(flight.killed))
            finally:
                self.tracker.flights.discard(flight)
            return
        flight.task.result()  # the relay's own error, as without the tracker


class Watchdog:
    """What happens when the monitor says the watchdog is due (Monitor.watch_health returns)."""

    def __init__(self, monitor, tracker: Tracker, log: Callable[[str], None],
                 last_word: Callable[[], Awaitable[None]], exit_now: Callable[[int], None]) -> None:
        self.monitor, self.tracker, self.log = monitor, tracker, log
        self.last_word = last_word  # the journal's last upload (journal.py), or nothing
        self.exit_now = exit_now  # ends the bridge with this code (app.Exit)

    async def run(self) -> None:
        problem, silent_s = await self.monitor.watch_health()
        await self.fire(problem, silent_s)

    async def fire(self, problem: str, silent_s: float) -> None:
        self.monitor.fail(f"watchdog: vLLM was serving, then its health check failed for {silent_s:.0f} s "
                          f"(VL_WATCHDOG={self.monitor.watchdog_s}; last: {problem}); the container exits "
                          f"{EXIT_WATCHDOG} so that RunPod restarts it")
        waiting = await self.tracker.fail_all("vLLM stopped answering on this pod (its health check failed for "
                                              f"{silent_s:.0f} s); the pod is restarting: retry in a few minutes")
        if waiting:
            self.log(f"watchdog: {waiting} waiting request(s) answered with an error")
        await self.last_word()
        self.exit_now(EXIT_WATCHDOG)
