"""The keep-alive bridge: `bridge.py --port 8080 --upstream http://127.0.0.1:18081 [--heartbeat 15]`.

RunPod's HTTP proxy cuts a connection that receives nothing for about 100 s, and vLLM sends
nothing before its first token. The bridge listens on the exposed port and relays every request
to vLLM on an internal port, byte for byte; on a generation request (POST /v1/chat/completions,
/v1/completions, /v1/responses, /v1/messages) it writes a heartbeat each time vLLM has been
silent for the interval: an SSE comment (OpenAI), `event: ping` (Anthropic), or whitespace ahead
of a non-streaming JSON body. It never rewrites the JSON it relays (it reads a request's "stream"
field only; the script's older bridge rewrote requests, and destroyed prefix caching). Built on
what vLLM's venv ships: uvicorn serves it, aiohttp talks to vLLM; HTTP is parsed by them only.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run as a script (/opt/prebake/entrypoint/bridge.py), as launch.py is.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))
    __package__ = os.path.basename(_here)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from .bridge_api import (GENERATION_PATHS, UpstreamError, error_body, error_event, heartbeat,  # noqa: E402
                         parse_error)
from .logline import logger, logging_config, stamped  # noqa: E402

try:
    import aiohttp
    import uvicorn
    from yarl import URL
except ImportError as missing:  # a venv without vLLM's server stack
    print(stamped("prebake-bridge", f"error: the keep-alive bridge needs uvicorn and aiohttp, which vLLM's venv "
                  f"ships ({missing}). Run this image's /opt/venv/bin/python, or set VL_BRIDGE=off to let vLLM bind "
                  "the exposed port itself."), file=sys.stderr, flush=True)
    sys.exit(2)

from .serving.modelnames import requested_model  # noqa: E402
from .serving.swap import SwapConfig, SwapFailed, Swapper, early_answer  # noqa: E402

# Not forwarded either way: they describe one connection, not the message (RFC 9110 7.6.1).
# content-length of a request is recomputed by aiohttp from the body it sends.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
                        b"upgrade", b"expect", b"host", b"content-length"})
RESPONSE_DROP = HOP_BY_HOP - {b"content-length"}
# aiohttp adds these unless told not to; the client's own go through unchanged.
NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# Below uvicorn's default keep-alive of 5 s in vLLM: the bridge never reuses a connection that
# vLLM is closing (a POST on it would fail with "Server disconnected").
UPSTREAM_KEEPALIVE_S = 3.0
LOADING = ("model loading: vLLM is still starting on this pod (downloading or loading weights, compiling, "
           "capturing CUDA graphs). The keep-alive bridge answers for it until vLLM's GET /health succeeds; "
           "retry in a minute; GET /prebake/status shows the progress.")


log = logger("prebake-bridge")


@dataclass(frozen=True)
class Config:
    upstream: str  # http://127.0.0.1:18081
    heartbeat_s: float = 15.0
    health_poll_s: float = 1.0
    swap: SwapConfig | None = None  # VL_SWAP: the models to swap between
    control_fd: int | None = None  # the launcher's channel for swaps


class Relay:
    """One relayed response: who may write next, and whether a heartbeat may go in now."""

    def __init__(self, send, api: str, streaming: bool, interval: float) -> None:
        self.send = send
        self.api = api
        self.streaming = streaming
        self.interval = interval
        # Until vLLM's answer starts, the heartbeat task and the relay take turns under this lock. Once
        # vLLM's body flows the relay writes without it: uvicorn writes each message whole, and writers
        # held by flow control resume in order, so a heartbeat decided at an event boundary stays there.
        self.lock = asyncio.Lock()
        self.started = False  # status line and headers sent to the client
        self.upstream_bytes = 0
        self.at_boundary = True  # the bytes sent so far end an SSE event (or nothing was sent)
        self.last_write = time.monotonic()
        self.heartbeats = 0

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        self.started = True

    async def body(self, chunk: bytes, more: bool = True) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": more})

    async def heartbeats_while_silent(self) -> None:
        beat = heartbeat(self.api, self.streaming)
        content_type = b"text/event-stream; charset=utf-8" if self.streaming else b"application/json"
        while True:
            await asyncio.sleep(max(0.0, self.last_write + self.interval - time.monotonic()))
            if time.monotonic() - self.last_write < self.interval:
                continue
            async with self.lock:
                # A non-streaming body takes whitespace only before its first byte; a stream takes a
                # heartbeat only between two events, never inside one.
                if self.at_boundary and (self.streaming or self.upstream_bytes == 0):
                    if not self.started:
                        await self.start(200, [(b"content-type", content_type), (b"cache-control", b"no-cache"),
                                               (b"x-accel-buffering", b"no")])
                    await self.body(beat)
                    self.heartbeats += 1
                self.last_write = time.monotonic()


class Bridge:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.session: aiohttp.ClientSession | None = None
        self.ready = asyncio.Event()
        self.poller: asyncio.Task | None = None
        self.swapper: Swapper | None = None

    # ASGI entry point
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        elif scope["type"] == "http":
            await self.http(scope, receive, send)

    async def lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=UPSTREAM_KEEPALIVE_S)
                # No total or read timeout: a 1M-token prefill is silent for minutes, by design.
                timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
                self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
                self.poller = asyncio.ensure_future(self.wait_for_vllm())
                if self.config.swap:
                    self.swapper = Swapper(self.config.swap, self.config.control_fd, self.config.upstream, log)
                    await self.swapper.start(self.session)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.poller:
                    self.poller.cancel()
                if self.swapper:
                    await self.swapper.stop()
                if self.session:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def wait_for_vllm(self) -> None:
        began = time.monotonic()
        url = self.config.upstream + "/health"
        while True:
            try:
                async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as answer:
                    if answer.status == 200:
                        self.ready.set()
                        log(f"vLLM answers at {self.config.upstream} after {time.monotonic() - began:.0f} s: relaying")
                        return
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(self.config.health_poll_s)

    async def http(self, scope, receive, send) -> None:
        body = await read_body(receive)
        if body is None:
            return  # the client left before sending its whole request
        path = scope["path"]
        api = GENERATION_PATHS.get(path) if scope["method"] == "POST" else None
        if not self.ready.is_set():
            await answer_json(send, 503, error_body(api or "openai", LOADING, "service_unavailable", 503),
                              [(b"retry-after", b"10")])
            return
        if self.swapper and (early := early_answer(self.swapper, scope["method"], path, api)):
            await answer_json(send, *early)
            return
        streaming = api is not None and is_streaming(body)
        began = time.monotonic()
        work = asyncio.ensure_future(self.relay(scope, body, send, api, streaming))
        gone = asyncio.ensure_future(wait_for_disconnect(receive))
        done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            gone.cancel()
            work.result()  # an error here aborts the client's connection, as a broken upstream would
            return
        # The client left: cancelling the relay closes the connection to vLLM, which aborts the
        # request and frees its KV cache.
        work.cancel()
        try:
            await work
        except (asyncio.CancelledError, Exception):
            pass
        log(f"client left {scope['method']} {path} after {time.monotonic() - began:.1f} s: request to vLLM cancelled")

    async def relay(self, scope, body: bytes, send, api: str | None, streaming: bool) -> None:
        relay = Relay(send, api or "", streaming, self.config.heartbeat_s)
        beats = asyncio.ensure_future(relay.heartbeats_while_silent()) if api else None
        began = time.monotonic()
        ticket = None
        try:
            if self.swapper and api:  # waits, with heartbeats, while the pod swaps to the model asked for
                try:
                    ticket = await self.swapper.admit(scope["path"], requested_model(body), body)
                except SwapFailed as err:
                    async with relay.lock:
                        await self.fail(relay, api, UpstreamError(str(err), err.kind, err.code))
                    return
                body = ticket.body(body)
            try:
                upstream = await self.session.request(
                    scope["method"], URL(self.config.upstream + target(scope), encoded=True),
                    headers=[(k.decode("latin-1"), header_text(v)) for k, v in scope["headers"]
                             if k not in HOP_BY_HOP],
                    data=body if body or scope["method"] not in ("GET", "HEAD", "OPTIONS") else None,
                    allow_redirects=False, skip_auto_headers=NO_AUTO_HEADERS)
            except aiohttp.ClientError as err:
                message = f"the keep-alive bridge could not reach vLLM at {self.config.upstream}: {err}"
                log(message)
                async with relay.lock:
                    await self.fail(relay, api, UpstreamError(message, "bad_gateway", 502))
                return
            async with upstream:
                async with relay.lock:
                    if relay.started and not 200 <= upstream.status < 300:
                        # Status 200 is already on the wire: vLLM's error goes out in the API's own error form.
                        raw = await upstream.read()
                        if streaming:
                            await relay.body(error_event(api, parse_error(upstream.status, raw)), more=False)
                        else:  # after the whitespace, vLLM's JSON error body as it is
                            await relay.body(raw, more=False)
                        log(f"{scope['method']} {scope['path']}: vLLM answered {upstream.status} after "
                            f"{time.monotonic() - began:.1f} s of heartbeats; sent to the client as an error event")
                        return
                    if not relay.started:
                        headers = [(k.lower(), v) for k, v in upstream.raw_headers if k.lower() not in RESPONSE_DROP]
                        await relay.start(upstream.status, headers)
                        if not 200 <= upstream.status < 300 or upstream.content_length is not None:
                            relay.at_boundary = False  # an error or a sized body goes out exactly as vLLM sent it
                try:
                    async for chunk in upstream.content.iter_any():
                        # Set before the write: a heartbeat must never follow a chunk that ends mid-event.
                        relay.at_boundary = chunk.endswith(b"\n\n")
                        relay.upstream_bytes += len(chunk)
                        relay.last_write = time.monotonic()
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except aiohttp.ClientError as err:
                    # Returning without ending the response makes uvicorn close the connection: the client
                    # sees a cut stream, as it would have from vLLM itself.
                    log(f"{scope['method']} {scope['path']}: vLLM's answer broke off after "
                        f"{relay.upstream_bytes} bytes ({err!r}); closing the client's connection")
                    return
                relay.at_boundary = False
                await relay.body(b"", more=False)
        except asyncio.CancelledError:
            if not (ticket and ticket.reason):
                raise
            async with relay.lock:  # a swap's drain time ran out: the API's error, not a cut connection
                await self.fail(relay, api, UpstreamError(ticket.reason, "service_unavailable", 503))
        finally:
            if beats:
                beats.cancel()
            if ticket:
                ticket.release()
        if relay.heartbeats:
            log(f"{scope['method']} {scope['path']}: {relay.heartbeats} heartbeat(s) while vLLM was silent; "
                f"done after {time.monotonic() - began:.1f} s")

    async def fail(self, relay: Relay, api: str | None, error: UpstreamError) -> None:
        """End the response with the bridge's own error, in the form the client can still read."""
        if not relay.started:
            await answer_json(relay.send, error.code, error_body(api or "openai", error.message, error.type, error.code))
        elif relay.streaming:
            await relay.body(error_event(api, error), more=False)
        else:
            await relay.body(error_body(api, error.message, error.type, error.code), more=False)


def target(scope) -> str:
    query = scope.get("query_string", b"")
    path = scope.get("raw_path") or scope["path"].encode()
    return (path + (b"?" + query if query else b"")).decode("latin-1")


def header_text(value: bytes) -> str:
    # aiohttp writes header values as UTF-8: a UTF-8 value decoded as such reaches vLLM byte for byte.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def is_streaming(body: bytes) -> bool:
    if b'"stream"' not in body:
        return False  # spares parsing a large non-streaming request
    try:
        request = json.loads(body)
    except ValueError:
        return False  # vLLM answers 400 at once; nothing to keep alive
    return isinstance(request, dict) and request.get("stream") is True


async def read_body(receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def wait_for_disconnect(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def answer_json(send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] = ()) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bridge.py", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, required=True, help="the exposed port (VL_PORT)")
    parser.add_argument("--upstream", required=True, help="vLLM's address, http://HOST:PORT")
    parser.add_argument("--heartbeat", type=float, default=15.0, help="seconds of silence before a heartbeat")
    parser.add_argument("--swap", type=SwapConfig.from_json, help="VL_SWAP's models, as the launcher passes them")
    parser.add_argument("--control-fd", type=int, help="the launcher's end of the swap channel (inherited)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    config = Config(upstream=args.upstream.rstrip("/"), heartbeat_s=args.heartbeat, swap=args.swap,
                    control_fd=args.control_fd)
    log(f"listening on {args.host}:{args.port}, relaying to {config.upstream}; heartbeat after "
        f"{config.heartbeat_s:g} s of silence")
    from .serving.status import wrap  # the status page and the watchdog, around the relay

    app = wrap(Bridge(config), os.environ, config.upstream, log)
    server = uvicorn.Server(uvicorn.Config(
        app, host=args.host, port=args.port, lifespan="on", log_level="warning", access_log=False,
        log_config=logging_config("prebake-bridge"),
        # vLLM's own Date and Server headers pass through; uvicorn adds none of its own.
        server_header=False, date_header=False, ws="none",
        timeout_keep_alive=5, timeout_graceful_shutdown=2))
    app.monitor.request_exit = lambda: setattr(server, "should_exit", True)
    server.run()
    if app.monitor.exit_code:
        return app.monitor.exit_code  # the watchdog gave up on vLLM
    # uvicorn returns without raising when it cannot bind: the supervisor must see a failure.
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
