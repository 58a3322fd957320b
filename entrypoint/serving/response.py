"""The client's side of one relayed exchange: every byte the bridge writes to the client goes through here.

One task writes, so a heartbeat can never land between two writes of one event: a heartbeat is decided
only while the relay waits for vLLM (wait, next_chunk), from the bytes already written (the last two bytes end an SSE
event, or nothing of vLLM's body was written yet for a JSON answer). While a write is held by a slow
client, no time passes for the heartbeat: a client slower than vLLM is no reason to beat.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from .api import UpstreamError, error_body, error_event, heartbeat

if TYPE_CHECKING:
    import aiohttp

    from .requestbody import RequestBody

SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


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

    async def _send_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def _send_body(self, chunk: bytes, more: bool = True) -> None:
        if not more:
            self.ended = True
        await self.send({"type": "http.response.body", "body": chunk, "more_body": more})
        if chunk:
            self.tail = (self.tail + chunk)[-2:]

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
        """vLLM's next bytes, with a heartbeat each time it is silent for the interval."""
        if self.api is None:
            return await content.readany()
        while True:
            wait = max(body.finished_at or 0.0, self.quiet_since) + self.interval - time.monotonic()
            if wait <= 0:
                await self._beat_if_allowed(body)
                continue
            try:
                # Cancelling readany loses nothing: the bytes stay in aiohttp's buffer.
                async with asyncio.timeout(wait):
                    return await content.readany()
            except TimeoutError:
                pass

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

    async def fail(self, error: UpstreamError) -> bool:
        """End with the bridge's own error in the form the client can still read; False when it cannot
        (then the connection is cut, as vLLM's own broken answer would be)."""
        if self.ended:
            return False
        if not self.started:
            body = error_body(self.error_api, error.message, error.type, error.code)
            await self._send_start(error.code, [(b"content-type", b"application/json"),
                                                (b"content-length", str(len(body)).encode())])
            await self._send_body(body, more=False)
            return True
        if self.sized:
            return False
        if self.sse and self.tail == b"\n\n":
            await self._send_body(error_event(self.api or "openai", error), more=False)
            return True
        if not self.sse and self.relayed == 0:  # only whitespace so far: the error is the JSON body
            await self._send_body(error_body(self.error_api, error.message, error.type, error.code), more=False)
            return True
        return False

    async def vllm_error_after_heartbeats(self, error: UpstreamError, raw: bytes) -> None:
        """Status 200 is already on the wire: vLLM's error goes out in the API's own error form."""
        if self.sse:
            await self._send_body(error_event(self.api or "openai", error), more=False)
        else:  # after the whitespace, vLLM's JSON error body as it is
            await self._send_body(raw, more=False)
