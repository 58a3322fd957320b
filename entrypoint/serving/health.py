"""vLLM's health as the bridge knows it: the one GET /health, and its last answer, for every reader.

The status page's monitor polls it every second (monitor.py: the page's phase, the watchdog); the relay
starts relaying once it first answers (relay.py); a swap asks it every 0.1 s while the next model loads
(swap.py). Each asks this object, so they never disagree about what vLLM last said.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp


class Health:
    def __init__(self, upstream: str) -> None:
        self.base = upstream.rstrip("/")  # the vLLM the bridge serves from; a sleeping swap set moves it (follow)
        self.session: aiohttp.ClientSession | None = None
        self.ok = False  # the last answer was 200
        self.last_ok: float | None = None  # monotonic time of the last 200
        self.problem: str | None = None  # why the last check failed
        self.answered = asyncio.Event()  # set at the first 200: the relay's readiness

    @property
    def url(self) -> str:
        return self.base + "/health"

    def follow(self, upstream: str) -> None:
        """From now on, the vLLM at `upstream` is the one the bridge serves from (a swap set whose models sleep:
        each runs its own vLLM). Its first answer is awaited afresh."""
        if upstream.rstrip("/") != self.base:
            self.base, self.ok, self.problem = upstream.rstrip("/"), False, None

    async def check(self, timeout_s: float = 5.0) -> bool:
        """One GET /health (at most timeout_s); its answer becomes the bridge's view of vLLM."""
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        try:
            async with self.session.get(self.url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as answer:
                ok, problem = answer.status == 200, f"GET /health answered {answer.status}"
        except asyncio.TimeoutError:
            ok, problem = False, f"GET /health did not answer within {timeout_s:g} s"
        except aiohttp.ClientError as err:
            ok, problem = False, f"GET /health failed ({type(err).__name__})"
        self.ok = ok
        if ok:
            self.last_ok, self.problem = time.monotonic(), None
            self.answered.set()
        else:
            self.problem = problem
        return ok

    async def close(self) -> None:
        if self.session:
            await self.session.close()
            self.session = None
