"""A client's request body, streamed to vLLM chunk by chunk as it arrives.

The bridge never holds a body whole: uvicorn pauses reading the client past 64 KiB, aiohttp writes each
chunk to vLLM, and a generation request's `stream` member is read on the way (streamflag.py). With swapping
on, the bridge reads ahead until the request's `model` is known (peek), and sends what it read first. A body
that stops arriving for BODY_IDLE_S ends the request (408), so half-sent requests do not hold
connections to vLLM forever.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import AsyncIterator, Awaitable, Callable

from .streamflag import StreamField, is_json_content_type

BODY_IDLE_S = 60.0


class ClientGone(Exception):
    """The client disconnected before its request was whole."""


class BodyTimeout(Exception):
    """No byte of the body for BODY_IDLE_S."""


class RequestBody:
    def __init__(self, receive: Callable[[], Awaitable[dict]], headers: list[tuple[bytes, bytes]],
                 scan: bool, idle_s: float = BODY_IDLE_S, cuts: bool = False) -> None:
        """cuts: the scanner also marks the prompt's parts, for a turn's digest (sessions.py)."""
        self.receive = receive
        self.turn = None  # a session's turn (sessions.Turn) whose digest is fed each chunk
        self.idle_s = idle_s
        fields = dict(headers)
        self.length = fields.get(b"content-length")  # httptools checked it is a number
        chunked = b"transfer-encoding" in fields
        self.present = chunked or (self.length is not None and self.length.strip() != b"0")
        self.field = StreamField(cuts) if scan and is_json_content_type(fields.get(b"content-type")) else None
        self.failure: Exception | None = None
        self.done = asyncio.Event()
        self.finished_at: float | None = None
        self.size = 0
        self.held: list[bytes] = []  # read ahead by peek(), not yet sent
        self.buffered = 0
        if not self.present:
            self._finish()

    def _finish(self) -> None:
        self.finished_at = time.monotonic()
        self.done.set()
        if self.field is not None:
            self.field.finish()

    @property
    def streaming(self) -> bool:
        """Whether vLLM will stream the answer: final once the body is whole, else what the bytes read so far say."""
        return self.field is not None and self.field.streaming()

    def upstream_content_length(self) -> str | None:
        """The client's Content-Length, passed on so that vLLM reads the same framing (None: chunked)."""
        return self.length.decode("ascii").strip() if self.length is not None and self.present else None

    async def _receive_chunk(self) -> bytes:
        """The next piece of the body; raises ClientGone or BodyTimeout (also kept in `failure`)."""
        try:
            async with asyncio.timeout(self.idle_s):
                message = await self.receive()
        except TimeoutError:
            self.failure = BodyTimeout(f"no byte of the request body for {self.idle_s:g} s")
            raise self.failure from None
        if message["type"] == "http.disconnect":
            self.failure = ClientGone("the client left while sending its request")
            raise self.failure
        chunk = message.get("body", b"")
        self.size += len(chunk)
        if self.field is not None:
            self.field.feed(chunk)
            if self.turn is not None:
                self.turn.digest.feed(chunk)
        if not message.get("more_body"):
            self._finish()
        return chunk

    async def peek(self, enough: Callable[[bool], bool]) -> None:
        """Read ahead, keeping what is read for vLLM, until `enough(final)` says so or the body ends."""
        while not self.done.is_set() and not enough(False):
            chunk = await self._receive_chunk()
            self.held.append(chunk)
            self.buffered += len(chunk)

    def whole(self) -> bytes:
        """The body, once peek() read all of it."""
        return b"".join(self.held)

    def replace(self, data: bytes) -> None:
        """Send `data` instead of the (whole, held) body."""
        self.held, self.buffered = [data], len(data)
        self.length = str(len(data)).encode()
        self.present = True

    def rename_model(self, name: str) -> bool:
        """Send `name` as the request's `model` instead of the string read ahead by peek(): the held bytes
        change at its place only (Content-Length follows). False when no `model` string was read ahead."""
        span = self.field.spans.get("model") if self.field is not None else None
        held = b"".join(self.held)
        if span is None or span[1] > len(held):
            return False
        value = json.dumps(name).encode()
        self.held = [held[:span[0]] + value + held[span[1]:]]
        delta = len(value) - (span[1] - span[0])
        self.buffered += delta
        if self.length is not None:
            self.length = str(int(self.length) + delta).encode()
        return True

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body for aiohttp to send: what peek() held, then the rest as it arrives."""
        while self.held:
            chunk = self.held.pop(0)
            self.buffered -= len(chunk)
            if chunk:
                yield chunk
        while not self.done.is_set():
            chunk = await self._receive_chunk()
            if chunk:
                yield chunk

    async def wait_for_disconnect(self) -> None:
        """Returns when the client disconnects; listens only once the body is whole."""
        await self.done.wait()
        while (await self.receive())["type"] != "http.disconnect":
            pass
