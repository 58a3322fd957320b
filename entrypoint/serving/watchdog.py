"""The watchdog's last word to the clients: when it gives up on vLLM, every request still waiting gets an
error in its API's own form instead of heartbeats until its own client times out.

Every relayed request runs inside `Tracker.call`, which watches what the client has received so
far (status line sent? an event stream? at an event boundary? only heartbeat whitespace?), so that
the error can still be written in a form the client parses: a JSON error answer, the API's error
event, or vLLM's JSON error after the whitespace. A request in the middle of a body is cut.
"""

from __future__ import annotations

import asyncio

from .api import GENERATION_PATHS, UpstreamError, error_body, error_event
ERROR_TYPE = "service_unavailable"


class InFlight:
    def __init__(self, api: str | None, send) -> None:
        self.api, self._send = api, send
        self.started = self.ended = self.streaming = False
        self.at_boundary = True  # the body so far ends an SSE event (or is empty)
        self.only_space = True  # the body so far is heartbeat whitespace (or empty)
        self.killed: str | None = None
        self.task: asyncio.Task | None = None

    async def send(self, message: dict) -> None:
        if self.killed:
            return  # the relay's own tasks may outlive its cancellation by a moment: the watchdog has answered
        if message["type"] == "http.response.start":
            self.started = True
            self.streaming = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                                 for k, v in message.get("headers", ()))
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                self.at_boundary = body.endswith(b"\n\n")
                self.only_space = self.only_space and not body.strip()
            self.ended = not message.get("more_body", False)
        await self._send(message)

    async def fail(self, message: str) -> None:
        """End the response with the watchdog's error, where the client can still read one."""
        error = UpstreamError(message, ERROR_TYPE, 503)
        api = self.api or "openai"
        if not self.started:
            body = error_body(api, message, ERROR_TYPE, 503)
            await self._send({"type": "http.response.start", "status": 503,
                              "headers": [(b"content-type", b"application/json"),
                                          (b"content-length", str(len(body)).encode())]})
            await self._send({"type": "http.response.body", "body": body, "more_body": False})
        elif self.ended:
            return
        elif self.streaming and self.at_boundary:
            await self._send({"type": "http.response.body", "body": error_event(api, error), "more_body": False})
        elif not self.streaming and self.only_space:
            await self._send({"type": "http.response.body", "body": error_body(api, message, ERROR_TYPE, 503),
                              "more_body": False})
        # else: mid-body; returning unfinished makes the server close the connection (a cut, as vLLM's own death)


class Tracker:
    def __init__(self) -> None:
        self.requests: set[InFlight] = set()
        self.failed: str | None = None

    async def call(self, app, scope, receive, send) -> None:
        if self.failed:  # between the watchdog firing and the bridge's exit
            await InFlight(None, send).fail(self.failed)
            return
        api = GENERATION_PATHS.get(scope["path"]) if scope["method"] == "POST" else None
        flight = InFlight(api, send)
        flight.task = asyncio.ensure_future(app(scope, receive, flight.send))
        self.requests.add(flight)
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
                self.requests.discard(flight)
        if flight.killed:
            try:
                await flight.fail(flight.killed)
            finally:
                self.requests.discard(flight)
            return
        flight.task.result()  # the relay's own error, as without the tracker

    async def fail_all(self, message: str, timeout: float = 5.0) -> int:
        """Cancel every relayed request and answer it with `message`; how many there were."""
        self.failed = message
        flights = list(self.requests)
        for flight in flights:
            flight.killed = message
            flight.task.cancel()
        deadline = asyncio.get_running_loop().time() + timeout
        while self.requests and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        return len(flights)
