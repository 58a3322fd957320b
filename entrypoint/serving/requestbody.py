"""A client's request body, streamed to vLLM chunk by chunk as it arrives.

The bridge never holds a body whole: uvicorn pauses reading the client past 64 KiB, aiohttp writes each
chunk to vLLM, and a generation request's `stream` member is read on the way (streamflag.py). Before it sends
anything, the bridge reads a JSON body's head through one reader (read_head) until it knows what it needs of it
(Ahead: the encoding; `model` to rename and `stream` for the heartbeats' form; a swap's `model`), giving up past
PEEK_MAX but on a swap's `model` and a held request's `stream`, which it reads however far: what it read goes first,
held in memory up to PEEK_MAX and past it in a temporary file. A body that gives `model` or `stream` twice is
refused (400, BodyAmbiguous) before vLLM has all of it: vLLM would read the last, the bridge may have acted on the
first. A body that stops arriving for BODY_IDLE_S ends the request (408), so half-sent requests do not hold
connections to vLLM forever.

A JSON body in UTF-16 or UTF-32 is sent on as UTF-8 (ToUtf8): FastAPI parses a body with json.loads of its bytes,
which detects those encodings (json.detect_encoding), so vLLM reads it; converted, the bridge reads its `model`
and `stream` too, and renames its model as any other's.
"""

from __future__ import annotations

import asyncio
import codecs
import enum
import json
import tempfile
import time
from typing import AsyncIterator, Awaitable, BinaryIO, Callable

from .streamflag import StreamField, is_json_content_type

BODY_IDLE_S = 60.0
PEEK_MAX = 1 << 20  # read ahead at most this much for a model to rename (not for a swap's model nor a held `stream`)
SPILL_CHUNK = 64 << 10  # what was read ahead past PEEK_MAX goes to vLLM in pieces of this size


class Ahead(enum.Enum):
    """What the bridge needs to know of a JSON body before its first byte goes to vLLM."""
    ENCODING = "encoding"  # the first 4 bytes (json.detect_encoding's): a UTF-16 or UTF-32 body goes chunked
    MEMBERS = "members"  # also `model` (to rename) and `stream` (the heartbeats' form while held), within PEEK_MAX
    MODEL = "model"  # as MEMBERS, but `model` however far it lies: a swap's admission decides by it


class ClientGone(Exception):
    """The client disconnected before its request was whole."""


class BodyTimeout(Exception):
    """No byte of the body for BODY_IDLE_S."""


class BodyUndecodable(Exception):
    """A UTF-16 or UTF-32 JSON body that is not valid in its encoding (json.loads would fail on it: vLLM's 400)."""


class BodyAmbiguous(Exception):
    """A body that gives `model` or `stream` twice: vLLM (json.loads) would read the last, the bridge may have acted
    on the first (renamed, swapped, framed it). Refused (400) before vLLM has the whole body, so vLLM never reads it."""


class ToUtf8:
    """A JSON body's bytes as UTF-8, chunk by chunk: UTF-16 and UTF-32 (with or without a byte order mark, as
    json.detect_encoding tells them from the first 4 bytes) converted, UTF-8 passed as it is. Lone surrogates
    travel as json.loads's 'surrogatepass' lets them, so vLLM decodes the same text."""

    def __init__(self) -> None:
        self.head: bytes | None = b""  # the first bytes, until the encoding is known
        self.decoder: codecs.IncrementalDecoder | None = None

    @property
    def converting(self) -> bool:
        return self.decoder is not None

    def __call__(self, chunk: bytes, final: bool) -> bytes:
        if self.head is not None:
            self.head += chunk
            if len(self.head) < 4 and not final:
                return b""
            chunk, head, self.head = self.head, self.head, None
            encoding = json.detect_encoding(head)
            if encoding.startswith(("utf-16", "utf-32")):
                self.decoder = codecs.getincrementaldecoder(encoding)("surrogatepass")
        if self.decoder is None:
            return chunk
        try:
            return self.decoder.decode(chunk, final).encode("utf-8", "surrogatepass")
        except UnicodeDecodeError as err:
            raise BodyUndecodable(f"the request body is not valid JSON text ({err.reason} in {err.encoding}): send "
                                  "it as UTF-8") from None


class RequestBody:
    def __init__(self, receive: Callable[[], Awaitable[dict]], headers: list[tuple[bytes, bytes]],
                 scan: bool, idle_s: float = BODY_IDLE_S, cuts: bool = False, ahead: Ahead = Ahead.MEMBERS) -> None:
        """cuts: the scanner also marks the prompt's parts, for a turn's digest (sessions.py). ahead: what
        read_head() reads."""
        self.receive = receive
        self.turn = None  # a session's turn (sessions.Turn) whose digest is fed each chunk
        self.idle_s = idle_s
        fields = dict(headers)
        self.length = fields.get(b"content-length")  # httptools checked it is a number
        chunked = b"transfer-encoding" in fields
        self.present = chunked or (self.length is not None and self.length.strip() != b"0")
        self.field = StreamField(cuts) if scan and is_json_content_type(fields.get(b"content-type")) else None
        self.utf8 = ToUtf8() if self.field is not None else None
        self.failure: Exception | None = None
        self.done = asyncio.Event()
        self.finished_at: float | None = None
        self.size = 0
        self.held: list[bytes] = []  # read ahead by read_head(), not yet sent: in memory, at most PEEK_MAX
        self.spill: BinaryIO | None = None  # and past it, in a temporary file
        self.buffered = 0
        self.ahead = ahead
        self.stream_however_far = False  # the start holds it: its heartbeats' form follows `stream`, wherever it is
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

    def head_known(self) -> bool:
        """Whether the bridge knows what it needs of the body (`ahead`) before sending it: its end; not a JSON object
        (nothing to read in it); its encoding; or `model` and `stream` both seen, each given up on past PEEK_MAX but
        a swap's `model` and a held request's `stream`. Either member seen implies the first 4 bytes, so the encoding
        is known then too."""
        field = self.field
        if self.done.is_set() or field is None or field.broken:
            return True
        if self.ahead is Ahead.ENCODING:
            return self.utf8.head is None
        past = self.buffered >= PEEK_MAX
        return (field.seen("model") or (past and self.ahead is not Ahead.MODEL)) and \
            (field.seen("stream") or (past and not self.stream_however_far))

    async def read_head(self) -> None:
        """Read ahead until head_known(), keeping what is read for vLLM (past PEEK_MAX in a temporary file, so that a
        `model` or `stream` far into a body of many MiB costs no memory); at once when it is known already."""
        while not self.head_known():
            self._keep(await self._receive_chunk())

    async def read_rest(self) -> None:
        """Read the rest of the body ahead, kept as read_head keeps it: before a swap, so that a second `model` is
        refused before the swap evicts anyone's model."""
        while not self.done.is_set():
            self._keep(await self._receive_chunk())

    def _keep(self, chunk: bytes) -> None:
        if self.spill is None and self.buffered + len(chunk) > PEEK_MAX:
            self.spill = tempfile.TemporaryFile(prefix="prebake-body-")
        if self.spill is not None:
            self.spill.write(chunk)
        else:
            self.held.append(chunk)
        self.buffered += len(chunk)

    def _drop_spill(self) -> None:
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    def upstream_content_length(self) -> str | None:
        """The client's Content-Length, passed on so that vLLM reads the same framing (None: chunked, as a body
        converted to UTF-8 goes)."""
        if self.utf8 is not None and self.utf8.converting:
            return None
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
        if self.utf8 is not None:
            try:
                chunk = self.utf8(chunk, not message.get("more_body"))
            except BodyUndecodable as err:
                self.failure = err
                raise
        if self.field is not None:
            self.field.feed(chunk)
            if self.field.duplicate is not None:  # this chunk never goes: vLLM never has the whole body
                self.failure = BodyAmbiguous(
                    f"the request body gives \"{self.field.duplicate}\" more than once: send it once (the keep-alive "
                    "bridge and vLLM could read different values)")
                raise self.failure
            if self.turn is not None:
                self.turn.digest.feed(chunk)
        if not message.get("more_body"):
            self._finish()
        return chunk

    def whole(self) -> bytes:
        """The body, once read_head() read all of it."""
        if self.spill is None:
            return b"".join(self.held)
        self.spill.seek(0)
        return b"".join(self.held) + self.spill.read()

    def replace(self, data: bytes) -> None:
        """Send `data` instead of the (whole, held) body."""
        self._drop_spill()
        self.held, self.buffered = [data], len(data)
        self.length = str(len(data)).encode()
        self.present = True
        self.utf8 = None  # whole, and sized: Content-Length goes on

    def rename_model(self, name: str) -> bool:
        """Send `name` as the request's `model` instead of the string read ahead by read_head(): the held bytes
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
        """The body for aiohttp to send: what read_head() held, then the rest as it arrives."""
        while self.held:
            chunk = self.held.pop(0)
            self.buffered -= len(chunk)
            if chunk:
                yield chunk
        if self.spill is not None:
            self.spill.seek(0)
            try:
                while chunk := self.spill.read(SPILL_CHUNK):
                    self.buffered -= len(chunk)
                    yield chunk
            finally:
                self._drop_spill()
        while not self.done.is_set():
            chunk = await self._receive_chunk()
            if chunk:
                yield chunk

    async def wait_for_disconnect(self) -> None:
        """Returns when the client disconnects; listens only once the body is whole."""
        await self.done.wait()
        while (await self.receive())["type"] != "http.disconnect":
            pass
