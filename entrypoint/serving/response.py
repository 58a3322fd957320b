"""The client's side of one request: every byte the bridge writes to a client goes through one Response.

It is the one record of what the client has been sent (status line? an event stream? at an event boundary?
only heartbeat whitespace? how many of vLLM's bytes?), so it is also the one place that knows how the request
can still fail in its API's own format: a JSON error answer, the API's error event, or vLLM's JSON error after
the whitespace; in the middle of a body, or of a body vLLM sized, the answer is left unfinished (a cut). The
relay writes through it (relay.py), and so does the watchdog when it gives up on vLLM (watchdog.py): both fail a
/v1/messages/count_tokens request in Anthropic's shape, since both read the same error_api.

One task writes, so a heartbeat can never land between two writes of one event: a heartbeat is decided
only while the relay waits for vLLM (wait, next_chunk), from the bytes already written (the last two bytes end an SSE
event, or nothing of vLLM's body was written yet for a JSON answer). While a write is held by a slow
client, no time passes for the heartbeat: a client slower than vLLM is no reason to beat.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..logline import stamped
from .api import GENERATION_PATHS, UpstreamError, api_of, error_body, error_event, heartbeat

if TYPE_CHECKING:
    import aiohttp

    from .requestbody import RequestBody

SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class _Throttled:
    """At most one refusal line a second: a flood of bad requests must not become a flood of log lines."""

    def __init__(self) -> None:
        self.last = 0.0
        self.held = 0

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        if now - self.last < 1.0:
            self.held += 1
            return
        more = f" (and {self.held} more refusals since the last line)" if self.held else ""
        print(stamped("prebake-bridge", f"{message}{more}"), file=sys.stderr, flush=True)
        self.last, self.held = now, 0


# Every refusal's line, whoever writes it (the front door's, the key check's, the relay's): 408s, refused keys and
# clients leaving mid-upload come in floods.
refusal_log = _Throttled()


class Response:
    def __init__(self, send: Callable[[dict], Awaitable[None]], api: str | None, error_api: str,
                 interval: float) -> None:
        self.send = send
        self.interval = interval  # seconds of silence before a heartbeat
        self.api = api  # the generation API (heartbeats), or None
        self.error_api = error_api  # the API whose error format the client reads
        self.sse = False  # the body is (or will be) an SSE stream
        self.started = False
        self.ended = False
        self.sized = False  # vLLM's Content-Length frames the body: nothing may be added
        self.relayed = 0  # bytes of vLLM's body written
        self.tail = b"\n\n"  # the last two bytes written: an SSE event boundary or not
        self.beats = 0
        self.quiet_since = time.monotonic()  # vLLM's last byte, or the last heartbeat
        self.silenced = False  # the watchdog answers this request itself: the relay's writes go nowhere
        self.timer: asyncio.TimerHandle | None = None  # the heartbeat's, while vLLM streams (next_chunk)
        self.reading: asyncio.Task | None = None  # the task waiting in next_chunk for vLLM's bytes
        self.beat_due = False  # the timer interrupted that wait: vLLM was silent for the interval

    @classmethod
    def for_request(cls, send: Callable[[dict], Awaitable[None]], method: str, path: str,
                    interval: float = 0.0) -> Response:
        """The request's APIs: heartbeats on a generation POST; errors in the format of the path's SDK."""
        return cls(send, GENERATION_PATHS.get(path) if method == "POST" else None, api_of(path), interval)

    # --- writes: the state is what the client was sent ------------------------------------------------
    async def _send_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        if self.silenced:
            return
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def _send_body(self, chunk: bytes, more: bool = True) -> None:
        if self.silenced:
            return
        if not more:
            self.ended = True
        if chunk:
            self.tail = chunk[-2:] if len(chunk) > 1 else self.tail[-1:] + chunk
        await self.send({"type": "http.response.body", "body": chunk, "more_body": more})

    async def answer(self, status: int, body: bytes, extra: list[tuple[bytes, bytes]] = (),
                     content_type: bytes = b"application/json", head: bool = False) -> None:
        """A whole answer of the bridge's own: JSON (a refusal, vLLM loading, a swap's model list), the status
        page (status.py) or the browser's page (welcome.py). `head`: a HEAD request's, the length without the body."""
        await self._send_start(status, [(b"content-type", content_type),
                                        (b"content-length", str(len(body)).encode()), *extra])
        await self._send_body(b"" if head else body, more=False)

    def may_beat(self) -> bool:
        if self.api is None or self.sized or self.ended:
            return False
        return self.tail == b"\n\n" if self.sse else self.relayed == 0

    async def beat(self) -> None:
        if not self.started:
            await self._send_start(200, SSE_HEADERS if self.sse else JSON_HEADERS)
        await self._send_body(heartbeat(self.api, self.sse))
        self.beats += 1

    async def wait(self, pending: asyncio.Future, body: RequestBody, since: float | None = None) -> Any:
        """What `pending` gives (vLLM's status and headers, or a swap's admission), with a heartbeat each time
        the client has waited the interval in silence. The wait starts when the body is whole, or at
        `since` (a swap holds the rest of the body until vLLM is up)."""
        while True:
            start = since if since is not None else body.finished_at
            if start is None or self.api is None:
                wait = self.interval  # the client is still sending: vLLM cannot answer yet, nor be silent
            else:
                wait = max(start, self.quiet_since) + self.interval - time.monotonic()
                if wait <= 0:
                    await self._beat_if_allowed(body)
                    continue
            done, _ = await asyncio.wait({pending}, timeout=wait)
            if done:
                return pending.result()

    async def next_chunk(self, content: aiohttp.StreamReader, body: RequestBody) -> bytes:
        """vLLM's next bytes, with a heartbeat each time it is silent for the interval.

        One timer per stream, not one per chunk (a chunk is a token: thousands a second at the engine's peak): it
        is armed for the silence's deadline and, when it fires, looks again at vLLM's last byte; only a real
        silence interrupts the read (a cancel of this task, taken back here), which loses nothing: the bytes stay
        in aiohttp's buffer."""
        if self.api is None:
            return await content.readany()
        while True:
            wait = self._silence_deadline(body) - time.monotonic()
            if wait <= 0:
                await self._beat_if_allowed(body)
                continue
            if self.timer is None:
                self.timer = asyncio.get_running_loop().call_later(wait, self._silence_timer, body)
            self.reading = task = asyncio.current_task()
            try:
                chunk = await content.readany()
            except asyncio.CancelledError:
                # the timer's cancel, and no other (a client that left, the bridge's shutdown): beat and read on
                if not self.beat_due or task.uncancel() > 0:
                    raise
                continue
            finally:
                self.reading = None
                self.beat_due = False
            if not chunk:
                self.stop_timer()
            return chunk

    def _silence_deadline(self, body: RequestBody) -> float:
        # never earlier than before: the timer armed for it fires early at worst, and looks again
        return max(body.finished_at or 0.0, self.quiet_since) + self.interval

    def _silence_timer(self, body: RequestBody) -> None:
        self.timer = None
        if self.reading is None:
            return  # writing to a slow client (no silence), or done: next_chunk arms it again when it waits
        wait = self._silence_deadline(body) - time.monotonic()
        if wait > 0:
            self.timer = asyncio.get_running_loop().call_later(wait, self._silence_timer, body)
            return
        self.beat_due = True
        self.reading.cancel()

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    async def _beat_if_allowed(self, body: RequestBody) -> None:
        if not self.started:
            self.sse = body.streaming  # before vLLM's headers, the request says which form
        if self.may_beat():
            await self.beat()
        self.quiet_since = time.monotonic()

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """vLLM's status line and headers, when no heartbeat went out before them."""
        fields = dict(headers)
        self.sized = b"content-length" in fields or not 200 <= status < 300
        self.sse = fields.get(b"content-type", b"").startswith(b"text/event-stream")
        await self._send_start(status, headers)

    async def write(self, chunk: bytes) -> None:
        await self._send_body(chunk)
        self.relayed += len(chunk)
        self.quiet_since = time.monotonic()  # after the write: time held by a slow client is not silence

    async def end(self) -> None:
        await self._send_body(b"", more=False)

    # --- failing in the request's API format --------------------------------------------------------
    async def fail(self, error: UpstreamError) -> bool:
        """End with the bridge's own error in the form the client can still read; False when it cannot
        (then the connection is cut, as vLLM's own broken answer would be)."""
        if self.ended or self.silenced:
            return False
        if not self.started:
            await self.answer(error.code, error_body(self.error_api, error.message, error.code, error.type))
            return True
        if self.sized:
            return False
        if self.sse and self.tail == b"\n\n":
            await self._send_body(error_event(self.api or "openai", error), more=False)
            return True
        if not self.sse and self.relayed == 0:  # only whitespace so far: the error is the JSON body
            await self._send_body(error_body(self.error_api, error.message, error.code, error.type), more=False)
            return True
        return False

    def silence(self) -> None:
        """From now on the relay's writes go nowhere: the watchdog answers the client (fail_silenced)."""
        self.silenced = True

    async def fail_silenced(self, error: UpstreamError) -> bool:
        """The watchdog's answer, written once the relay it cancelled has ended, from what the client was sent."""
        self.silenced = False
        return await self.fail(error)

    async def vllm_error_after_heartbeats(self, error: UpstreamError, raw: bytes) -> None:
        """Status 200 is already on the wire: vLLM's error goes out in the API's own error form."""
        if self.sse:
            await self._send_body(error_event(self.api or "openai", error), more=False)
        else:  # after the whitespace, vLLM's JSON error body as it is
            await self._send_body(raw, more=False)
