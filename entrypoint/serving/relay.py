"""The keep-alive bridge's relay: the innermost layer of the bridge's ASGI chain (app.py builds the chain, main.py
is its command line, `bridge.py --port 8080 --upstream http://127.0.0.1:18081 [--heartbeat 15]`).

RunPod's HTTP proxy cuts a connection that receives nothing for about 100 s, and vLLM sends
nothing before its first token. The bridge listens on the exposed port and relays every request
to vLLM on an internal port, byte for byte; on a generation request (POST /v1/chat/completions,
/v1/completions, /v1/responses, /v1/messages) it writes a heartbeat each time vLLM has been
silent for the interval: an SSE comment (OpenAI), `event: ping` (Anthropic), or whitespace ahead
of a non-streaming JSON body. It never rewrites the JSON it relays (it reads a request's "stream" and
"model" fields; the script's older bridge rewrote requests, and destroyed prefix caching), but for the
string of `model` when it is a `claude-*` name vLLM does not serve. Built on
what vLLM's venv ships: uvicorn serves it, aiohttp talks to vLLM; HTTP is parsed by them only.

This file is the relay's sequence; each concern is a module of serving/: the HTTP limits
(frontdoor), the API key (auth: decided, and a refusal answered, in front of the relay), vLLM's URL and headers
(upstream), the streamed request body (requestbody, streamflag), every write to the client and the heartbeats'
timing (response: the Response the watchdog's Tracking layer put in the scope),
swapping (swap), and the model names (modelnames): a `claude-*` name the pod does not serve, which is
how Claude Code names its models, is answered by the pod's model (the one byte span of `model` changes).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp
from yarl import URL

from .api import GENERATION_PATHS, UpstreamError, error_body, parse_error
from ..contract import NO_START_HOLD_HEADER, SwapConfig
from ..logline import logger
from . import auth
from .requestbody import Ahead, BodyAmbiguous, BodyTimeout, BodyUndecodable, ClientGone, RequestBody
from .response import Response, refusal_log
from .upstream import upstream_headers, upstream_url
from .watchdog import RESPONSE

from ..claudecode_wire import BACKGROUND_MAX_BYTES, from_claude_code, session_of
from ..modelnames import ServedNames
from .health import Health
from .sessions import SessionBook
from .swap.model import SwapFailed
from .swap.scheduler import Swapper

# POST paths beside GENERATION_PATHS whose `model` vLLM checks: renamed as theirs are (modelnames.py).
NAMED_PATHS = frozenset({"/v1/messages/count_tokens"})
# POST paths that generate beside GENERATION_PATHS (SageMaker's, and a batch of chats): no heartbeats for them (one
# JSON answer), but with a swap set each holds a ticket on the loaded model, so that no swap drains past them or puts
# their model to sleep mid-request; while a swap is pending or under way they are answered 503 (swap.py).
TICKETED_PATHS = frozenset({"/invocations", "/v1/chat/completions/batch"})
# Every path the bridge's layers compare a request's with: a request vLLM would route to one of them is
# treated as that one (routes.Routed), a final line feed or vLLM's --root-path in front notwithstanding.
ROUTES = frozenset(GENERATION_PATHS) | NAMED_PATHS | TICKETED_PATHS | auth.INSIDE_ONLY | auth.OPEN_PATHS | {"/v1/models"}
# Not relayed from vLLM's answer: they describe one connection (RFC 9110 7.6.1).
RESPONSE_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                           b"transfer-encoding", b"upgrade"})
# aiohttp adds these unless told not to; the client's own go through unchanged.
NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# Below uvicorn's default keep-alive of 5 s in vLLM: the bridge never reuses a connection that
# vLLM is closing (a POST on it would fail with "Server disconnected").
UPSTREAM_KEEPALIVE_S = 3.0
ERROR_BODY_MAX = 1 << 20  # what is read of vLLM's error answer to put it in an error event
LOADING = ("model loading: vLLM is still starting on this pod (downloading or loading weights, compiling, "
           "capturing CUDA graphs). The keep-alive bridge answers for it until vLLM's GET /health succeeds; "
           "retry in a minute; GET /prebake/status shows the progress.")

SWAP_PENDING = ("a model swap is about to start on this pod (a request asked for another model of the swap set); "
                "retry this one in a minute, once GET /v1/models shows a model loaded.")
START_ENDED = ("vLLM's start on this pod did not finish: vLLM exited while starting, or the pod is stopping. "
               "GET /prebake/status shows why; retry once the pod is back.")


log = logger("prebake-bridge")


@dataclass(frozen=True)
class Config:
    upstream: str  # http://127.0.0.1:18081
    heartbeat_s: float = 15.0
    api_key: str | None = None  # VLLM_API_KEY in the bridge's environment; None: open to anyone
    body_timeout_s: float = 60.0
    swap: SwapConfig | None = None  # VL_SWAP: the models to swap between
    control_fd: int | None = None  # the launcher's channel for swaps
    served: tuple[str, ...] = ()  # the names vLLM answers to, its own first; () renames nothing
    root_path: str = ""  # vLLM's --root-path: its router strips it from the front of a path (routes.py)
    start_hold_s: float = 0.0  # VL_START_HOLD: a generation request waits this long for vLLM's start; 0: 503 at once


def sent_by_router(headers: list[tuple[bytes, bytes]]) -> bool:
    """The router pod asks a starting pod for a 503 rather than a hold: it has other pods to try."""
    return any(name == NO_START_HOLD_BYTES for name, _ in headers)


NO_START_HOLD_BYTES = NO_START_HOLD_HEADER.encode()


class Relay:
    """The relay, as the ASGI app behind auth.KeyCheck (which answered every refused request: what reaches the relay
    may reach vLLM) and watchdog.Tracking (the request's Response, from the scope); app.Lifespan calls startup and
    shutdown."""

    def __init__(self, config: Config, health: Health | None = None) -> None:
        self.config = config
        self.base = URL(config.upstream)
        self.session: aiohttp.ClientSession | None = None
        self.ready = asyncio.Event()
        self.health = health or Health(config.upstream)  # polled by the status page's monitor (app.py)
        self.poller: asyncio.Task | None = None
        self.swapper: Swapper | None = None
        self.names = ServedNames({config.served[0]: config.served}) if config.served else None
        self.renamed: set[str] = set()  # the names already logged as renamed
        self.sessions = SessionBook()  # Claude Code's sessions, for the status page (sessions.py)
        self.held = 0  # generation requests waiting for vLLM's start now (the status page shows it)
        # Claude Code sessions a held request of which ran out of VL_START_HOLD, until vLLM answers: their
        # non-streaming requests are answered 503 at once (fallback_after_hold)
        self.ran_out: set[str] = set()

    async def startup(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=UPSTREAM_KEEPALIVE_S)
        # No total or read timeout: a 1M-token prefill is silent for minutes, by design.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
        self.poller = asyncio.ensure_future(self.wait_for_vllm())
        if self.config.swap:
            self.swapper = Swapper(self.config.swap, self.config.control_fd, self.health, log)
            await self.swapper.start(self.session)

    async def shutdown(self) -> None:
        if self.poller:
            self.poller.cancel()
        if self.swapper:
            await self.swapper.stop()
        if self.session:
            await self.session.close()

    async def wait_for_vllm(self) -> None:
        began = time.monotonic()
        await self.health.answered.wait()
        self.ready.set()
        self.ran_out.clear()
        log(f"vLLM answers at {self.config.upstream} after {time.monotonic() - began:.0f} s: relaying")

    async def __call__(self, scope, receive, send) -> None:
        # A copy: uvicorn appends a chunked body's trailers to the list it gave as the headers.
        scope = {**scope, "headers": list(scope["headers"])}
        method, path = scope["method"], scope["path"]
        response: Response = scope[RESPONSE]
        error_api = response.error_api
        url = upstream_url(self.base, scope.get("raw_path") or b"", scope.get("query_string") or b"")
        if url is None:
            await response.answer(400, error_body(error_api, "the request target must be a path (origin form, "
                                                  "`/v1/...`)", 400))
            return
        api = response.api
        if not self.ready.is_set() and not (api and self.config.start_hold_s and not sent_by_router(scope["headers"])):
            # /health too: RunPod reads it, and it says 503 until vLLM serves, however long requests are held
            await response.answer(503, error_body(error_api, LOADING, 503),
                                  [(b"retry-after", b"10")])
            return
        if self.swapper and method == "GET" and path == "/v1/models":  # the set's models, loaded or not
            await response.answer(200, self.swapper.model_list())
            return
        if self.swapper and api is None and (reason := self.swapper.unavailable()):
            # a request that names no model cannot wait for a swap (a generation request does, with heartbeats)
            await response.fail(UpstreamError.of_bridge(reason, 503))
            return
        named = api is not None or (method == "POST" and path in NAMED_PATHS)
        in_session = api is not None and session_of(scope["headers"]) is not None
        # what the body's head must tell before it goes on: a swap's model; a name to rename, or the heartbeats'
        # form while the start holds it; else only the encoding
        ahead = Ahead.MODEL if self.swapper and api else \
            Ahead.MEMBERS if self.names or self.swapper or not self.ready.is_set() else Ahead.ENCODING
        body = RequestBody(receive, scope["headers"], scan=named, idle_s=self.config.body_timeout_s, cuts=in_session,
                           ahead=ahead)
        if in_session:
            body.turn = self.sessions.begin(scope["headers"], body.field)
        began = time.monotonic()
        work = asyncio.ensure_future(self.exchange(scope, url, body, response))
        gone = asyncio.ensure_future(body.wait_for_disconnect())
        try:
            done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # uvicorn cancels what still runs when its graceful shutdown ends (SIGTERM): the client gets an
            # answer it can read where it still can, and vLLM's request is closed.
            gone.cancel()
            await settle(work)
            await response.fail(UpstreamError.of_bridge(START_ENDED if not self.ready.is_set() else
                                              "the keep-alive bridge is shutting down (the pod is stopping); "
                                              "retry once it is back", 503))
            log(f"{method} {path}: ended after {time.monotonic() - began:.1f} s by the bridge's shutdown")
            return
        if work in done:
            gone.cancel()
            error = work.exception()
            if error is not None:
                await self.failed(method, path, error, response, time.monotonic() - began)
            return
        # The client left: cancelling the relay closes the connection to vLLM, which aborts the
        # request and frees its KV cache.
        await settle(work)
        log(f"client left {method} {path} after {time.monotonic() - began:.1f} s: request to vLLM cancelled")

    async def hold_for_start(self, scope, body: RequestBody, response: Response) -> bool:
        """A generation request that came while vLLM starts: held, with heartbeats (their form read from the
        body's `stream`, as a swap does), until vLLM first answers its health check; False once answered with
        LOADING's error because VL_START_HOLD ran out. A start that fails stops the bridge: http() answers
        START_ENDED then."""
        self.held += 1  # from its first byte: a body that comes slowly is held all the same
        ready = None
        session = session_of(scope["headers"])
        ran_out = f"{LOADING} (held {self.config.start_hold_s / 60:g} min, VL_START_HOLD)"
        try:
            body.stream_however_far = True  # the heartbeats' form and the rule below need the real `stream`
            await body.read_head()
            if session in self.ran_out and not body.streaming:
                # Claude Code retries a stream that failed without streaming: held, its heartbeats' whitespace would
                # commit a 200 whose error body it prints as "empty or malformed"; a 503 it prints, and retries
                log(f"{scope['method']} {scope['path']}: a non-streaming request of a session whose held request "
                    "ran out of VL_START_HOLD, answered 503 at once")
                await response.fail(UpstreamError.of_bridge(ran_out, 503))
                return False
            began = time.monotonic()
            ready = asyncio.ensure_future(asyncio.wait_for(self.ready.wait(), self.config.start_hold_s))
            await response.wait(ready, body, since=began)
        except asyncio.TimeoutError:
            log(f"{scope['method']} {scope['path']}: held {time.monotonic() - began:.0f} s while vLLM starts "
                "(VL_START_HOLD), answered 503")
            if session is not None and len(self.ran_out) < 1000:
                self.ran_out.add(session)
            await response.fail(UpstreamError.of_bridge(ran_out, 503))
            return False
        finally:
            self.held -= 1
            if ready is not None and not ready.done():
                ready.cancel()
        log(f"{scope['method']} {scope['path']}: held {time.monotonic() - began:.1f} s while vLLM started; relaying")
        return True

    async def failed(self, method: str, path: str, error: BaseException, response: Response, took: float) -> None:
        """One log line (no traceback) and, where the client can still read it, an error in its format."""
        if isinstance(error, ClientGone):
            refusal_log(f"client left {method} {path} after {took:.1f} s, before its request was whole")
            return
        if isinstance(error, BodyTimeout):
            refusal_log(f"{method} {path}: {error}; answered 408")
            await response.fail(UpstreamError.of_bridge(str(error), 408))
            return
        if isinstance(error, (BodyUndecodable, BodyAmbiguous)):
            refusal_log(f"{method} {path}: {error}; answered 400")
            await response.fail(UpstreamError.of_bridge(str(error), 400))
            return
        log(f"{method} {path}: the bridge failed after {took:.1f} s ({type(error).__name__}: {error})")
        await response.fail(UpstreamError.of_bridge(f"the keep-alive bridge could not relay this request "
                                                    f"({type(error).__name__})", 502))

    async def admit(self, path: str, headers: list[tuple[bytes, bytes]], body: RequestBody, response: Response):
        """With swapping: wait, with heartbeats, until the model the request names is up. The body's head is read
        (read_head: until its `model`, however far, the body being made with Ahead.MODEL; whole when `model`
        comes last), and whole when small (a background call may be answered by another model, its body
        rewritten) or when it names another model than the loaded one (a swap evicts a model: a second `model` later
        in the body is refused first); the rest stays with the client until then."""
        field = body.field  # None for a body FastAPI would not parse as JSON: it names no model
        await body.read_head()
        if field is not None and self.swapper.names.model(field.model()) not in (None, self.swapper.loaded):
            await body.read_rest()  # a swap evicts a model: only for the body's one `model` (a second is refused)
        small = body.whole() if body.done.is_set() and body.size <= BACKGROUND_MAX_BYTES \
            and from_claude_code(headers) else None
        model = field.model() if field is not None else None
        pending = asyncio.ensure_future(self.swapper.admit(path, model, small))
        try:
            ticket = await response.wait(pending, body, since=time.monotonic())
        except SwapFailed as err:
            await response.fail(UpstreamError.of_bridge(str(err), 503))
            return None
        finally:
            if not pending.done():
                pending.cancel()
        ticket.task = asyncio.current_task()  # what a swap's eviction cancels
        self.rename(body, model, ticket.rename())
        return ticket

    async def name_model(self, body: RequestBody) -> None:
        """Outside a swap's admission: a `claude-*` name vLLM does not serve becomes the loaded model's. The body
        is read ahead through read_head (its `model` and `stream`, at most PEEK_MAX: Claude Code sends `model`
        first), then sent on."""
        field = body.field
        if field is None:
            return
        await body.read_head()
        model = field.model()
        if self.swapper:
            self.rename(body, model, self.swapper.served.rename(model, self.swapper.loaded))
        else:
            self.rename(body, model, self.names.rename(model, next(iter(self.names.by_model))))

    def rename(self, body: RequestBody, requested: str | None, name: str | None) -> None:
        if name is None or not body.rename_model(name):
            return
        if requested not in self.renamed and len(self.renamed) < 100:
            self.renamed.add(requested)
            log(f"model {requested!r} is answered by {name}, under its own name (logged once per name)")

    async def exchange(self, scope, url: URL, body: RequestBody, response: Response) -> None:
        ticket = None
        try:
            if not self.ready.is_set() and not await self.hold_for_start(scope, body, response):
                return
            if self.swapper and response.api:
                ticket = await self.admit(scope["path"], scope["headers"], body, response)
                if ticket is None:
                    return
            elif self.swapper and scope["method"] == "POST" and scope["path"] in TICKETED_PATHS:
                ticket = self.swapper.hold_loaded()
                if ticket is None:
                    await response.fail(UpstreamError.of_bridge(self.swapper.unavailable() or SWAP_PENDING, 503))
                    return
                ticket.task = asyncio.current_task()
            elif (self.names or self.swapper) and body.field is not None:
                await self.name_model(body)  # a generation request, or count_tokens
            if self.swapper:  # each model of a sleeping swap set has its own vLLM
                url = url.with_port(URL(self.swapper.upstream(ticket.model if ticket else self.swapper.loaded)).port)
            await self.forward(scope, url, body, response)
        except asyncio.CancelledError:
            if not (ticket and ticket.reason):
                raise
            # a swap's drain time ran out: the API's error, not a cut connection
            await response.fail(UpstreamError.of_bridge(ticket.reason, 503))
        finally:
            if ticket:
                ticket.release()

    async def forward(self, scope, url: URL, body: RequestBody, response: Response) -> None:
        method, path = scope["method"], scope["path"]
        headers = upstream_headers(scope["headers"], (scope.get("client") or (None,))[0])
        await body.read_head()  # at once when a layer above read it; else its encoding (a UTF-16/32 body goes chunked)
        length = body.upstream_content_length()
        if length is not None:
            headers.append(("Content-Length", length))
        pending = asyncio.ensure_future(self.session.request(
            method, url, headers=headers, data=body.chunks() if body.present else None,
            allow_redirects=False, skip_auto_headers=NO_AUTO_HEADERS))
        began = time.monotonic()
        try:
            upstream = await response.wait(pending, body)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as err:
            if body.failure is not None:
                raise body.failure from None
            message = f"the keep-alive bridge could not reach vLLM at {url.origin()}: {err}"
            log(message)
            await response.fail(UpstreamError.of_bridge(message, 502))
            return
        finally:
            if not pending.done():
                pending.cancel()
        async with upstream:
            if response.started and not 200 <= upstream.status < 300:
                raw = await upstream.content.read(ERROR_BODY_MAX)
                await response.vllm_error_after_heartbeats(parse_error(upstream.status, raw), raw)
                log(f"{method} {path}: vLLM answered {upstream.status} after {time.monotonic() - began:.1f} s of "
                    "heartbeats; sent to the client as an error event")
                return
            if not response.started:
                await response.start(upstream.status, [(k.lower(), v) for k, v in upstream.raw_headers
                                                        if k.lower() not in RESPONSE_DROP])
            elif upstream.headers.get("content-type", "").startswith("text/event-stream"):
                response.sse = True
            response.quiet_since = time.monotonic()
            try:
                while chunk := await response.next_chunk(upstream.content, body):
                    await response.write(chunk)
                    if body.turn is not None:
                        body.turn.keep(chunk)
            except aiohttp.ClientError as err:
                log(f"{method} {path}: vLLM's answer broke off after {response.relayed} bytes ({type(err).__name__})")
                # Where the client can read it, the API's error; mid-event or in a sized body, the answer stays
                # unfinished and uvicorn closes the connection: the cut vLLM's own answer would have been.
                await response.fail(UpstreamError.of_bridge(
                    f"vLLM's answer broke off after {response.relayed} bytes: the connection to vLLM was lost "
                    "(did vLLM restart?)", 502))
                return
            finally:
                response.stop_timer()  # the heartbeat's: however the stream ended
            await response.end()
            if body.turn is not None:
                self.sessions.finish(body.turn, upstream.status)
        if response.beats:
            log(f"{method} {path}: {response.beats} heartbeat(s) while vLLM was silent; "
                f"done after {time.monotonic() - began:.1f} s")


async def settle(task: asyncio.Future) -> None:
    """Cancel a task and wait for it to end, whatever it raises."""
    task.cancel()
    try:
        await task
    except BaseException:  # noqa: BLE001 - its end, not its error, is wanted here
        pass
