"""The keep-alive bridge's ASGI chain, built in one place (build_app), and the server that runs it (serve).

A request passes, in order:
  frontdoor.FrontDoor    HTTP limits, in uvicorn's protocol (before any ASGI layer sees the request)
  routes.Routed          the path as vLLM's router will dispatch it
  Lifespan               the bridge's start and stop: the relay's, the monitor's, the background tasks
  auth.KeyCheck          the key decided once (scope["prebake.access"]); a refused request answered here: 401, 403
  status.StatusPage      /prebake/status(.txt) answered here, but to a browser; everything else goes on
  podstop.CountActivity  the idle stop's activity (only with VL_IDLE_STOP on)
  watchdog.Tracking      the request's one Response (scope["prebake.response"]), known to the watchdog
  welcome.WelcomePage    a browser's GET of /, /prebake/status(.txt) (browser.py): a page for a person
  relay.Relay            the relay to vLLM
Each layer gets its configuration in its constructor; what the launcher decided comes from the state file
(monitor.Duties), the rest from the command line and the contract's environment names (main.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping

import asyncio

from ..logline import logger, logging_config
from . import routes
from .auth import KeyCheck
from .frontdoor import Doorway, Limits
from .journal import EXITED_UPLOAD_S, WATCHDOG_UPLOAD_S, Uploader
from .monitor import Monitor
from .podstop import Activity, CountActivity, PodStopper
from .relay import ROUTES, Config, Relay
from .status import Sources, StatusPage
from .watchdog import Tracker, Tracking, Watchdog
from .browser import wants_page
from .welcome import WelcomePage

log = logger("prebake-bridge")


class Exit:
    """How a layer ends the bridge with an exit code (the watchdog's): the server, made after the app, binds it."""

    def __init__(self) -> None:
        self.code = 0
        self._stop: Callable[[], None] = lambda: None

    def bind(self, stop: Callable[[], None]) -> None:
        self._stop = stop

    def __call__(self, code: int) -> None:
        self.code = code
        self._stop()


class Lifespan:
    """The ASGI lifespan of the chain: start the relay and the background tasks, stop them in reverse."""

    def __init__(self, app, relay: Relay, monitor: Monitor, tasks: list[Callable[[], Awaitable[None]]],
                 last_word: Callable[[], Awaitable[None]]) -> None:
        self.app, self.relay, self.monitor = app, relay, monitor
        self.tasks = tasks  # each runs for the bridge's lifetime
        self.last_word = last_word  # at the stop: the journal's last upload when vLLM died
        self.running: list[asyncio.Task] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.monitor.open()
                self.running = [asyncio.ensure_future(task()) for task in self.tasks]
                await self.relay.startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for task in self.running:
                    task.cancel()
                await self.last_word()
                await self.monitor.close()
                await self.relay.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


@dataclass
class Chain:
    """The bridge's ASGI app, with its parts named (the tests and serve read them)."""
    app: Callable
    relay: Relay
    monitor: Monitor
    tracker: Tracker
    watchdog: Watchdog
    exit: Exit
    page: StatusPage
    idle: PodStopper | None
    journal: Uploader | None

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)


def build_app(config: Config, environ: Mapping[str, str], exit_now: Exit | None = None) -> Chain:
    """The chain for the relay's `config`; `environ` holds the contract's names (the key, the run folder, tokens)."""
    exit_now = exit_now or Exit()
    relay = Relay(config)
    monitor = Monitor(environ, config.upstream, log, relay.health)  # the relay's health: one view of vLLM
    duties = monitor.duties
    activity = Activity()
    idle = PodStopper(duties.idle_stop, environ, activity, monitor.awake, log, monitor.redact) \
        if duties.idle_stop else None
    journal = Uploader.planned(duties.journal, environ, log)
    swap = config.swap
    sources = Sources(relay=relay, idle=idle, journal=journal, environ=environ,
                      swap_set=tuple((m.name, m.max_model_len) for m in swap.models) if swap else ())
    tracker = Tracker()
    inner = Tracking(WelcomePage(relay, monitor, sources, config.start_hold_s), tracker, config.heartbeat_s)
    if idle is not None:
        inner = CountActivity(inner, activity)
    page = StatusPage(inner, monitor, sources)

    async def watchdog_word() -> None:
        if journal:
            await journal.push(await page.journal_text(), timeout=WATCHDOG_UPLOAD_S)

    async def exited_word() -> None:
        if journal and monitor.failure is None:
            monitor.refresh_state()
            if monitor.vllm_exit():  # vLLM died: the supervisor is stopping us; one last upload, briefly
                await journal.push(await page.journal_text(), timeout=EXITED_UPLOAD_S)

    watchdog = Watchdog(monitor, tracker, log, watchdog_word, exit_now)
    tasks: list[Callable[[], Awaitable[None]]] = [watchdog.run, monitor.watch_log]
    if journal:
        tasks.append(lambda: journal.run(page.journal_text, lambda: monitor.healthy))
    if idle:
        tasks.append(idle.run)
    app = Lifespan(KeyCheck(page, config.api_key, config.root_path, wants_page), relay, monitor, tasks, exited_word)
    return Chain(routes.Routed(app, ROUTES, config.root_path), relay, monitor, tracker, watchdog, exit_now, page,
                 idle, journal)


def event_loop() -> str:
    """uvicorn's loop for the bridge: uvloop where the venv has it (vLLM's does, and its own server runs on it: each
    of the bridge's steps per token and per request is a turn of the loop, cheaper on uvloop), else asyncio's own."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def serve(config: Config, environ: Mapping[str, str], host: str, port: int, limits: Limits) -> int:
    """Run the bridge until it is stopped; its exit code."""
    import uvicorn

    exit_now = Exit()
    app = build_app(config, environ, exit_now)
    server = uvicorn.Server(uvicorn.Config(
        app.app, host=host, port=port, lifespan="on", loop=event_loop(), log_level="warning", access_log=False,
        log_config=logging_config("prebake-bridge"),
        # vLLM's own Date and Server headers pass through; uvicorn adds none of its own.
        server_header=False, date_header=False, ws="none", http=Doorway(limits).protocol(),
        # uvicorn would trust X-Forwarded-For from 127.0.0.1 (RunPod's proxy, or anyone on the pod) as
        # the client's address; the bridge reports the peer it sees (serving/upstream.py).
        proxy_headers=False,
        timeout_keep_alive=5, timeout_graceful_shutdown=2))
    exit_now.bind(lambda: setattr(server, "should_exit", True))
    server.run()
    if exit_now.code:
        return exit_now.code  # the watchdog gave up on vLLM
    # uvicorn returns without raising when it cannot bind: the supervisor must see a failure.
    return 0 if server.started else 1
