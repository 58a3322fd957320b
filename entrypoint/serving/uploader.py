"""The journal's uploads, in the bridge: one at a time, bounded in time, never fatal (journal.py decides)."""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

from ..contract import HF_DEFAULT_ENDPOINT as DEFAULT_ENDPOINT, JOURNAL_STARTING_PERIOD_S as STARTING_PERIOD_S, Journal
from .journal import upload

UPLOAD_TIMEOUT_S = 60.0


class Uploader:
    def __init__(self, journal: Journal, secret: str, log: Callable[[str], None], endpoint: str = DEFAULT_ENDPOINT) -> None:
        self.journal, self.secret, self.log, self.endpoint = journal, secret, log, endpoint
        self.busy = asyncio.Lock()
        self.uploads = 0
        self.last_error: str | None = None
        self.last_at: float | None = None

    async def push(self, text: str, timeout: float = UPLOAD_TIMEOUT_S) -> bool:
        if self.busy.locked():
            return False  # the previous upload still runs: skip this turn rather than pile threads up
        async with self.busy:
            future = asyncio.get_running_loop().run_in_executor(None, upload, self.journal, text, self.secret)
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout)
            except Exception as err:  # noqa: BLE001 - whatever the Hub or the network does, the pod goes on
                problem = "no answer within %g s" % timeout if isinstance(err, asyncio.TimeoutError) else \
                    f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
                if problem != self.last_error:
                    self.log(f"journal: upload to {self.journal.where(self.endpoint)} failed ({problem}); the pod goes on, "
                             "the next upload retries")
                self.last_error = problem
                return False
            if self.uploads == 0 or self.last_error:
                self.log(f"journal: uploaded to {self.journal.where(self.endpoint)}")
            self.uploads += 1
            self.last_error, self.last_at = None, time.time()
            return True

    async def run(self, render: Callable[[], Awaitable[str]], serving: Callable[[], bool]) -> None:
        """Upload every 25 s until serving, then on the serving period (or once, with period 0)."""
        while True:
            was_serving = serving()
            await self.push(await render())
            if was_serving and not self.journal.period_s:
                return
            # A change between starting and serving (or failing) uploads at once, as the script did after /health.
            deadline = time.monotonic() + (self.journal.period_s if was_serving else STARTING_PERIOD_S)
            while time.monotonic() < deadline and serving() == was_serving:
                await asyncio.sleep(1.0)
