"""The journal: the status page and the tail of vLLM's log, uploaded to a Hugging Face repository.

The bootstrap script this project replaced did it because a pod without a working shell is seen
only through HTTP, and start-up, when one most needs to see, is when the endpoint does not answer:
every 25 s until vLLM serves, then every VL_JOURNAL_PERIODE seconds (120; 0 stops after the first
upload once serving), once more when the watchdog gives up on vLLM, and once more when the bridge stops after
vLLM exited. Uploads go through huggingface_hub (it reads HF_ENDPOINT), one at a time, each bounded in time; a
Hub that is down or refuses costs a log line, never the pod. The launcher decides the plan (state.json's
`observe.journal`, contract.Journal); this module is all of the bridge's side of it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Mapping

from ..contract import HF_DEFAULT_ENDPOINT, JOURNAL_STARTING_PERIOD_S as STARTING_PERIOD_S, Journal, hf_token
from ..logline import utf8

UPLOAD_TIMEOUT_S = 60.0
WATCHDOG_UPLOAD_S = 10.0  # the last upload before the watchdog ends the container
EXITED_UPLOAD_S = 3.0  # the last upload when the bridge stops after vLLM died: the supervisor is stopping it
JOURNAL_BYTES = 60000  # of vLLM's log in a journal upload, as the script sent


def upload(journal: Journal, text: str, secret: str) -> None:
    from huggingface_hub import HfApi  # only with the journal on: it costs the bridge a second of imports

    HfApi(token=secret).upload_file(path_or_fileobj=utf8(text), path_in_repo=journal.path_in_repo,
                                    repo_id=journal.repo_id, repo_type=journal.repo_type,
                                    commit_message=f"prebake journal {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")


def journal_text(page_text: str, tail) -> str:
    """The status page for people, then as much of vLLM's last lines as JOURNAL_BYTES holds."""
    lines, size = [], 0
    for line in reversed(tail):
        size += len(line) + 1
        if size > JOURNAL_BYTES:
            break
        lines.append(line)
    return page_text + "\n=== vLLM's log (last lines) ===\n" + "\n".join(reversed(lines)) + "\n"


class Uploader:
    """The uploads of one plan: one at a time, bounded in time, never fatal."""

    def __init__(self, journal: Journal, secret: str, log: Callable[[str], None],
                 endpoint: str = HF_DEFAULT_ENDPOINT) -> None:
        self.journal, self.secret, self.log, self.endpoint = journal, secret, log, endpoint
        self.busy = asyncio.Lock()
        self.uploads = 0
        self.last_error: str | None = None
        self.last_at: float | None = None

    @classmethod
    def planned(cls, plan: object, environ: Mapping[str, str], log: Callable[[str], None]) -> Uploader | None:
        """The launcher's plan (observe.journal) with the token from the environment; None when either is missing."""
        secret = hf_token(environ)
        if not isinstance(plan, dict) or not secret:
            return None
        return cls(Journal.from_json(plan), secret, log, environ.get("HF_ENDPOINT") or HF_DEFAULT_ENDPOINT)

    def status(self) -> dict:
        """The status page's "journal"."""
        return {"where": self.journal.where(self.endpoint), "uploads": self.uploads, "last_error": self.last_error}

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
