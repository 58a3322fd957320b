"""The status page, `GET /prebake/status` (JSON) and `/prebake/status.txt` (the same, for people), and the
monitor behind it: vLLM's health (and the watchdog), its log (the phase, the last lines), its queue
figures, the GPUs' memory, and the journal.

It is served by the keep-alive bridge itself, outside vLLM's API, so it answers from the bridge's
first second, while vLLM loads, and after vLLM failed. With VLLM_API_KEY set it needs that key
(auth.py); a pod without a key shows only what identifies the image and the phase, never a log
line. Every string it returns went through the redactor.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from typing import Callable, Mapping
from urllib.parse import parse_qs

import aiohttp

from ..bridge_api import error_body
from ..errors import EXIT_WATCHDOG
from ..logline import utc_stamp
from ..marker import read_marker
from . import gpus, metrics
from .auth import api_key, is_authorized
from .journal import DEFAULT_ENDPOINT, Journal, token
from .phases import MEANING, LogPhase
from .redact import Redactor
from .runstate import LOG, RUN_DIR_VARIABLE, STATE, read
from .uploader import Uploader
from .vllmlog import Follower
from .watchdog import Tracker

PATHS = {"/prebake/status": "json", "/prebake/status.txt": "text"}
TAIL_LINES = 50  # on the page by default; ?lines=N up to KEPT_LINES
KEPT_LINES = 500
JOURNAL_BYTES = 60000  # of vLLM's log in a journal upload, as the script sent
HEALTH_POLL_S = 1.0
METRICS_EVERY_S = 5.0
RATE_WINDOW = 7  # samples: throughput over the last ~30 s
GPU_MAX_AGE_S = 5.0
DEFAULT_WATCHDOG_S = 90


def _seconds(value: object, default: int) -> int:
    return value if isinstance(value, int) and value >= 0 else default


class Monitor:
    """Everything the page shows, kept current by two background tasks (health, log)."""

    def __init__(self, environ: Mapping[str, str], upstream: str, log: Callable[[str], None]) -> None:
        self.upstream, self.log = upstream, log
        self.redact = Redactor(environ)
        self.key = api_key(environ)
        self.nvidia_smi = environ.get("VL_NVIDIA_SMI") or "nvidia-smi"
        self.run_dir = environ.get(RUN_DIR_VARIABLE) or ""
        self.state: dict = read(os.path.join(self.run_dir, STATE)) if self.run_dir else {}
        self.state_version: tuple[int, int] | None = None
        observe = self.state.get("observe") or {}
        self.watchdog_s = _seconds(observe.get("watchdog_s"), self._env_watchdog(environ))
        self.identity = dict(self.state.get("identity") or self._marker_identity(environ))
        self.began = time.time()
        self.log_phase = LogPhase()
        self.phase_since = self.began
        self.tail: deque[str] = deque(maxlen=KEPT_LINES)
        self.follower = Follower(os.path.join(self.run_dir, LOG)) if self.run_dir else None
        self.starts = 0
        self.healthy = False
        self.served = False  # /health answered since vLLM's latest start: the watchdog is armed
        self.last_ok: float | None = None
        self.health_problem: str | None = None
        self.failure: str | None = None
        self.samples: deque[metrics.Sample] = deque(maxlen=RATE_WINDOW)
        self.gpus: list[dict] = []
        self.gpus_problem: str | None = None
        self.gpus_at = 0.0
        self.gpu_lock = asyncio.Lock()
        self.tracker = Tracker()
        self.uploader = self._uploader(observe.get("journal"), environ)
        self.tasks: list[asyncio.Task] = []
        self.session: aiohttp.ClientSession | None = None
        self.exit_code = 0
        self.request_exit: Callable[[], None] = lambda: None

    @staticmethod
    def _env_watchdog(environ: Mapping[str, str]) -> int:
        raw = environ.get("VL_WATCHDOG", "")  # only without the launcher's state file (the bridge run alone)
        return int(raw) if raw.isascii() and raw.isdigit() else DEFAULT_WATCHDOG_S

    @staticmethod
    def _marker_identity(environ: Mapping[str, str]) -> dict:
        try:
            return dict(read_marker(environ).identity)
        except Exception:  # noqa: BLE001 - the page says "unknown" rather than fail
            return {}

    def _uploader(self, plan: object, environ: Mapping[str, str]) -> Uploader | None:
        secret = token(environ)
        if not isinstance(plan, dict) or not secret:
            return None
        journal = Journal(plan["repo_id"], plan["repo_type"], plan["path_in_repo"], plan["serving_period_s"])
        return Uploader(journal, secret, self.log, environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)

    # --- background ------------------------------------------------------------------------------
    def start(self) -> None:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        self.tasks = [asyncio.ensure_future(self.watch_health()), asyncio.ensure_future(self.watch_log())]
        if self.uploader:
            self.tasks.append(asyncio.ensure_future(self.uploader.run(self.journal_text, lambda: self.healthy)))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.uploader and self.failure is None:
            self.refresh_state()
            if self.vllm_exit():  # vLLM died: the supervisor is stopping us; one last upload, briefly
                await self.uploader.push(await self.journal_text(), timeout=3.0)
        if self.session:
            await self.session.close()

    def refresh_state(self) -> None:
        path = os.path.join(self.run_dir, STATE)
        try:
            found = os.stat(path)
        except OSError:
            return
        version = (found.st_ino, found.st_mtime_ns)  # each write replaces the file: a new inode
        if version == self.state_version:
            return
        self.state_version, self.state = version, read(path) or self.state
        starts = len((self.state.get("vllm") or {}).get("starts") or [])
        if starts > self.starts and self.starts:
            self.served = self.healthy = False  # a restarted vLLM: disarmed until it serves again
            self.set_log_phase_reset()
        self.starts = starts

    def set_log_phase_reset(self) -> None:
        self.log_phase = LogPhase(self.log_phase.markers)
        self.phase_since = time.time()

    async def watch_log(self) -> None:
        while True:
            self.refresh_state()
            if self.follower:
                for line in self.follower.lines():
                    self.tail.append(line)
                    if self.log_phase.feed(line):
                        self.phase_since = time.time()
            await asyncio.sleep(0.5)

    async def watch_health(self) -> None:
        probe_s = float(max(1, min(5, self.watchdog_s or 5)))
        next_metrics = 0.0
        while True:
            began = time.monotonic()
            try:
                async with self.session.get(self.upstream + "/health",
                                            timeout=aiohttp.ClientTimeout(total=probe_s)) as answer:
                    ok, problem = answer.status == 200, f"GET /health answered {answer.status}"
            except asyncio.TimeoutError:
                ok, problem = False, f"GET /health did not answer within {probe_s:g} s"
            except aiohttp.ClientError as err:
                ok, problem = False, f"GET /health failed ({type(err).__name__})"
            now = time.monotonic()
            if ok:
                if not self.served:
                    self.phase_since = time.time()
                self.healthy = self.served = True
                self.last_ok, self.health_problem = now, None
                if now >= next_metrics:
                    next_metrics = now + METRICS_EVERY_S
                    await self.read_metrics()
            else:
                self.healthy, self.health_problem = False, problem
                if self.watchdog_due(now):
                    await self.fire(problem, now - self.last_ok)
                    return
            await asyncio.sleep(max(0.0, HEALTH_POLL_S - (time.monotonic() - began)))

    def watchdog_due(self, now: float) -> bool:
        return bool(self.watchdog_s) and self.served and self.last_ok is not None and \
            now - self.last_ok >= self.watchdog_s and not self.state.get("swapping")

    async def fire(self, problem: str, silent_s: float) -> None:
        self.failure = (f"watchdog: vLLM was serving, then its health check failed for {silent_s:.0f} s "
                        f"(VL_WATCHDOG={self.watchdog_s}; last: {problem}); the container exits {EXIT_WATCHDOG} "
                        "so that RunPod restarts it")
        self.phase_since = time.time()
        self.log(self.failure)
        waiting = await self.tracker.fail_all("vLLM stopped answering on this pod (its health check failed for "
                                              f"{silent_s:.0f} s); the pod is restarting: retry in a few minutes")
        if waiting:
            self.log(f"watchdog: {waiting} waiting request(s) answered with an error")
        if self.uploader:
            await self.uploader.push(await self.journal_text(), timeout=10.0)
        self.exit_code = EXIT_WATCHDOG
        self.request_exit()

    async def read_metrics(self) -> None:
        try:
            async with self.session.get(self.upstream + "/metrics", timeout=aiohttp.ClientTimeout(total=5)) as answer:
                text = await answer.text() if answer.status == 200 else ""
        except (aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError):
            return
        found = metrics.sample(text, time.monotonic())
        if found:
            if self.samples and found.prompt_tokens < self.samples[-1].prompt_tokens:
                self.samples.clear()  # counters restarted with vLLM
            self.samples.append(found)

    async def refresh_gpus(self) -> None:
        async with self.gpu_lock:
            if time.monotonic() - self.gpus_at < GPU_MAX_AGE_S:
                return
            self.gpus, self.gpus_problem = await gpus.query(self.nvidia_smi)
            self.gpus_at = time.monotonic()

    # --- what the page says ----------------------------------------------------------------------
    def vllm_exit(self) -> dict | None:
        found = (self.state.get("vllm") or {}).get("exit")
        return found if isinstance(found, dict) else None

    def phase(self, full: bool = True) -> tuple[str, str]:
        """(phase, why); `why` quotes vLLM's log only when `full`."""
        if self.failure:
            return "failed", self.failure
        if self.state.get("swapping"):  # before the exit: stopping the old vLLM is part of a swap
            return "swapping", f"starting {self.state['swapping']}"
        ended = self.vllm_exit()
        if ended:
            return "failed", str(ended.get("why") or "vLLM exited")
        if self.served:
            if self.healthy:
                return "serving", MEANING["serving"]
            failing = time.monotonic() - (self.last_ok or time.monotonic())
            watchdog = f"; the watchdog restarts the pod after {self.watchdog_s} s" if self.watchdog_s else ""
            return "serving", f"warning: {self.health_problem} for {failing:.0f} s{watchdog}"
        phase = self.log_phase.phase
        return phase, (f"{MEANING[phase]}; vLLM's last milestone: {self.log_phase.line}"
                       if self.log_phase.line and full else MEANING[phase])

    def snapshot(self, full: bool, lines: int = TAIL_LINES) -> dict:
        phase, why = self.phase(full)
        starts = self.starts or len((self.state.get("vllm") or {}).get("starts") or [])
        status = {
            "image": self.identity or None,
            "phase": phase, "why": why, "phase_since": utc_stamp(self.phase_since),
            "uptime_s": round(time.time() - float(self.state.get("started_at") or self.began)),
            "restarts": max(0, starts - 1),
        }
        if not full:
            status["more"] = ("decisions, GPUs, queue and vLLM's log are shown only on a pod with an API key "
                              "(VLLM_API_KEY), to requests that carry it")
            return self.redact_all(status)
        queue = metrics.figures(self.samples[-1], self.samples[0] if len(self.samples) > 1 else None) \
            if self.samples and self.healthy else None
        status.update({
            "health": {"ok": self.healthy, "last_ok_s_ago": None if self.last_ok is None else
                       round(time.monotonic() - self.last_ok, 1), "problem": self.health_problem,
                       "watchdog_s": self.watchdog_s},
            "queue": queue,
            "gpus": self.gpus, "gpus_problem": self.gpus_problem,
            "vllm": {"argv": self.state.get("argv"), "pid": (self.state.get("vllm") or {}).get("pid"),
                     "exit": self.vllm_exit()},
            "decisions": self.state.get("decisions"),
            "previous_run": self.state.get("previous_run"),
            "journal": None if not self.uploader else {
                "where": self.uploader.journal.where(self.uploader.endpoint), "uploads": self.uploader.uploads,
                "last_error": self.uploader.last_error},
            "log": {"file": os.path.join(self.run_dir, LOG) if self.run_dir else None,
                    "lines": list(self.tail)[-lines:] if lines else []},
        })
        return self.redact_all(status)

    def redact_all(self, value):
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_all(item) for item in value]
        if isinstance(value, dict):
            return {key: self.redact_all(item) for key, item in value.items()}
        return value

    async def journal_text(self) -> str:
        await self.refresh_gpus()
        status = self.snapshot(full=True, lines=0)
        text = render_text(status)
        tail, size = [], 0
        for line in reversed(self.tail):
            size += len(line) + 1
            if size > JOURNAL_BYTES:
                break
            tail.append(line)
        return text + "\n=== vLLM's log (last lines) ===\n" + "\n".join(reversed(tail)) + "\n"


def render_text(status: dict) -> str:
    """The status for people: what a browser or `curl` shows, and what the journal uploads."""
    image = status.get("image") or {}
    out = [f"prebake {image.get('variant', '?')} revision {image.get('revision', '?')}, vLLM {image.get('vllm', '?')}, "
           f"CUDA {image.get('cuda', '?')}, built {image.get('created', '?')}",
           f"phase: {status['phase']} since {status['phase_since']} ({status['why']})",
           f"uptime {status['uptime_s']} s, restarts {status['restarts']}"]
    if "more" in status:
        return "\n".join(out + [status["more"]]) + "\n"
    health = status["health"]
    out.append(f"health: {'ok' if health['ok'] else health['problem'] or 'not answering yet'}; watchdog "
               f"{str(health['watchdog_s']) + ' s' if health['watchdog_s'] else 'off'}")
    queue = status.get("queue")
    if queue:
        out.append(f"queue: running {queue['running']}, waiting {queue['waiting']}, KV cache "
                   f"{queue['kv_cache_usage_percent']}%, prompt {queue['prompt_tokens_per_s']} tokens/s, "
                   f"generation {queue['generation_tokens_per_s']} tokens/s (over {queue['over_s']} s)")
    for gpu in status.get("gpus") or []:
        out.append(f"gpu {gpu['index']} {gpu['name']}: {gpu['memory_used_mib']} / {gpu['memory_total_mib']} MiB")
    if status.get("gpus_problem"):
        out.append(f"gpus: {status['gpus_problem']}")
    previous = status.get("previous_run")
    if previous:
        out.append(f"previous run: {json.dumps(previous)}")
    if status.get("journal"):
        out.append(f"journal: {json.dumps(status['journal'])}")
    out.append("decisions:")
    out += [f"  {d['topic']}: {d['decision']} ({d['why']})" for d in status.get("decisions") or []]
    argv = (status.get("vllm") or {}).get("argv")
    if argv:
        out.append("vllm: " + " ".join(argv))
    lines = (status.get("log") or {}).get("lines") or []
    if lines:
        out.append(f"--- vLLM's log, last {len(lines)} lines ({status['log']['file']}) ---")
        out += lines
    return "\n".join(out) + "\n"


class StatusApp:
    """Wraps the bridge's ASGI app: the status paths are answered here, every other request is relayed
    through the watchdog's tracker, and the monitor runs for the app's lifetime."""

    def __init__(self, app, monitor: Monitor) -> None:
        self.app, self.monitor = app, monitor

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._lifespan(receive), send)
        elif scope["type"] == "http" and scope["path"] in PATHS:
            await self.answer(scope, send, PATHS[scope["path"]])
        elif scope["type"] == "http":
            await self.monitor.tracker.call(self.app, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _lifespan(self, receive):
        async def wrapped():
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.monitor.start()
            elif message["type"] == "lifespan.shutdown":
                await self.monitor.stop()
            return message
        return wrapped

    async def answer(self, scope, send, form: str) -> None:
        monitor = self.monitor
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, "application/json",
                          error_body("openai", "the status page answers GET only", "method_not_allowed", 405),
                          [(b"allow", b"GET, HEAD")])
            return
        if monitor.key and not is_authorized(scope["headers"], monitor.key):
            await _answer(send, 401, "application/json", error_body(
                "openai", "the status page needs this pod's API key (VLLM_API_KEY): send it as "
                "`Authorization: Bearer KEY` or `x-api-key: KEY`", "authentication_error", 401),
                [(b"www-authenticate", b"Bearer")])
            return
        full = monitor.key is not None
        lines = TAIL_LINES
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("lines", [""])[0].isdigit():
            lines = min(int(query["lines"][0]), KEPT_LINES)
        if full:  # at most a second for nvidia-smi: the page answers, with the GPUs of the last reading if need be
            try:
                await asyncio.wait_for(asyncio.shield(monitor.refresh_gpus()), 1.0)
            except asyncio.TimeoutError:
                pass
        status = monitor.snapshot(full, lines)
        if form == "json":
            body = (json.dumps(status, indent=1, ensure_ascii=False) + "\n").encode()
            await _answer(send, 200, "application/json", body, head=scope["method"] == "HEAD")
        else:
            await _answer(send, 200, "text/plain; charset=utf-8", render_text(status).encode(),
                          head=scope["method"] == "HEAD")


async def _answer(send, status: int, content_type: str, body: bytes, extra=(), head: bool = False) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body, "more_body": False})


def wrap(app, environ: Mapping[str, str], upstream: str, log: Callable[[str], None]) -> StatusApp:
    return StatusApp(app, Monitor(environ, upstream, log))
