"""The bridge's HTTP/1.1 connection handling: uvicorn's httptools protocol with the limits a public port needs.

uvicorn parses HTTP for the bridge (vLLM's venv ships it with httptools); by itself it has no limit on
the size of a request's head, no time limit on a head that never ends, accepts every request-target
form, and answers a malformed request in plain text. This subclass adds, before the bridge's ASGI app
sees a request:
- origin-form targets only (`/path?query`): `*`, authority form (CONNECT) and absolute form get 400,
  since the bridge builds vLLM's URL from a fixed address and the path;
- 414 for a target over MAX_TARGET bytes, 431 for headers over MAX_HEAD bytes or MAX_HEADERS fields;
- 408 when a request's head is not complete `head_timeout_s` after its first byte (or after the
  connection opened): half-sent requests cannot hold connections forever;
- trailers of a chunked body are dropped: they never join the request's headers;
- every refusal in the JSON error format of the API the path belongs to, then the connection closes;
- at most `max_connections` client connections (set from the open-file limit, limits.py): past it, a new
  connection closes the oldest one with no request in progress (idle, or still sending its head), so that
  idle connections, however many, never lock out a client that sends a request.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .api import api_of, error_body
from .response import refusal_log

MAX_TARGET = 16 * 1024
MAX_HEAD = 64 * 1024  # request line and headers together
MAX_HEADERS = 256
HEAD_TIMEOUT_S = 30.0  # --head-timeout's default


@dataclass(frozen=True)
class Limits:
    head_timeout_s: float = HEAD_TIMEOUT_S
    max_connections: int = 4096  # the bridge's command line sets it from the open-file limit (limits.connection_cap)


class Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def refusal_body(path: bytes, message: str, status: int) -> bytes:
    """The error shape of the API the path belongs to (api.py's, as every other answer of the bridge)."""
    return error_body(api_of(path.decode("latin-1")), message, status)


class Doorway:
    """One listening server's front door: its limits and its open client connections, oldest first."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.open: dict[FrontDoor, None] = {}

    def protocol(self):
        """uvicorn's `http`: what makes each connection's protocol."""
        return functools.partial(FrontDoor, doorway=self)


class FrontDoor(HttpToolsProtocol):
    def __init__(self, *args, doorway: Doorway, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.doorway = doorway

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.url = b""
        self.head_bytes = 0
        self.in_head = True  # until the current request's headers are complete
        self.head_timer: asyncio.TimerHandle | None = None
        self.doorway.open[self] = None
        if len(self.doorway.open) > self.doorway.limits.max_connections:
            self._make_room()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.doorway.open.pop(self, None)
        self._cancel_head_timer()
        super().connection_lost(exc)

    def busy(self) -> bool:
        """A request of this connection is being answered (a client with the key, past the bridge's check)."""
        return self.cycle is not None and not self.cycle.response_complete and not self.in_head

    def _make_room(self) -> None:
        open_now = self.doorway.open
        oldest = next((other for other in open_now if other is not self and not other.busy()), None)
        victim = oldest or self  # every other one is answering a request: this one goes
        open_now.pop(victim, None)
        refusal_log(f"more than {self.doorway.limits.max_connections} connections open (the open-file limit): closed "
                    f"{'the oldest idle one' if oldest else 'a new one'}, from {(victim.client or ('?',))[0]}")
        victim._cancel_head_timer()
        victim.transport.close()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self.head_timer = self.loop.call_later(self.doorway.limits.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm_head_timer()  # a pipelined head waits for the answer before it: not the client's delay
            return
        if self.head_bytes == 0 and not self.url:
            self.transport.close()  # an idle connection that never sent a byte: nothing to answer
            return
        self.refuse(Refusal(408, f"the request's head (request line and headers) did not arrive within "
                                 f"{self.doorway.limits.head_timeout_s:g} s"))

    def refuse(self, refusal: Refusal) -> None:
        path = self.url.split(b"?", 1)[0]
        body = refusal_body(path, refusal.message, refusal.status)
        head = [STATUS_LINE[refusal.status], b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode() + b"\r\n", b"connection: close\r\n", b"\r\n"]
        if self.client:
            refusal_log(f"refused a request from {self.client[0]} with {refusal.status}: {refusal.message}")
        self._cancel_head_timer()
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # No WebSocket in the bridge: the request is served as plain HTTP, as uvicorn does with ws="none".
            pass
        except httptools.HttpParserCallbackError as err:
            cause = err.__context__
            self.refuse(cause if isinstance(cause, Refusal) else
                        Refusal(400, "malformed HTTP request: the request target or a header cannot be read"))
            return
        except httptools.HttpParserError as err:
            self.refuse(Refusal(400, f"malformed HTTP request ({err})"))
            return
        if self.in_head:
            # httptools holds a header's partial value itself: count what arrived, not what it reported.
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD + MAX_TARGET:
                too_long_target = not self.headers and len(self.url) > MAX_TARGET
                self.refuse(Refusal(414, f"request target over {MAX_TARGET} bytes") if too_long_target else
                            Refusal(431, f"request headers over {MAX_HEAD} bytes"))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.in_head = True
        self.head_bytes = 0
        self.head_count = 0
        self.head_size = 0
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_TARGET:
            raise Refusal(414, f"request target over {MAX_TARGET} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.in_head:
            return  # a chunked body's trailer: never a request header
        self.head_count += 1
        self.head_size += len(name) + len(value) + 4
        if self.head_count > MAX_HEADERS or self.head_size > MAX_HEAD:
            raise Refusal(431, f"request headers over {MAX_HEADERS} fields or {MAX_HEAD} bytes")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.in_head = False
        self._cancel_head_timer()
        if not self.url.startswith(b"/"):
            # `*`, authority form (CONNECT host:port) and absolute form (http://host/path): the bridge
            # serves its own paths only, and must never read a target as an address to connect to.
            raise Refusal(400, "the request target must be a path (origin form, `/v1/...`); the bridge "
                               "relays to vLLM only")
        super().on_headers_complete()
