"""The status page, `GET /prebake/status` (JSON) and `/prebake/status.txt` (the same, for people; a browser without
the key gets the page for a person there, welcome.py), from
what the monitor (monitor.py) keeps current and what each other feature reports from its own home (Sources: the
relay, the idle stop, the journal); and the journal's text, the same page with more log (journal.py uploads it).

It is served by the keep-alive bridge itself, outside vLLM's API, so it answers from the bridge's
first second, while vLLM loads, and after vLLM failed. With VLLM_API_KEY set it needs that key
(auth.py); a pod without a key shows only what identifies the image and the phase, never a log
line. Every string it returns went through the redactor, then safetext.safe (controls escaped, PAGE_LIMIT).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Protocol
from urllib.parse import parse_qs

from .api import error_body
from .browser import wants_page
from ..claudecode import for_pod
from ..logline import utc_stamp, utf8
from ..safetext import safe
from . import metrics, sessions
from .response import Response
from .journal import journal_text as with_log
from .monitor import KEPT_LINES, Monitor
from ..contract import LOG, read_state
from ..untrusted import set_aside_files

if TYPE_CHECKING:
    from .journal import Uploader
    from .podstop import PodStopper
    from .sessions import SessionBook
    from .swap.scheduler import Swapper

COMPILE_CACHE = "compile-cache.json"  # in the run folder: launcher/compilecache.py's STATE_FILE

PATHS = {"/prebake/status": "json", "/prebake/status.txt": "text"}
PUBLIC_IDLE = ("after_s", "idle_s", "awake", "stops_at", "stop_requested_at")  # idle stop on a page without a key
TAIL_LINES = 50  # on the page by default; ?lines=N up to KEPT_LINES
NO_STORE = [(b"cache-control", b"no-store")]
PAGE_LIMIT = 4096  # characters of any one string on the page (a record or a log line written before the caps)


class RelayFacts(Protocol):
    """What the page reads of the relay (relay.Relay)."""
    swapper: Swapper | None  # made at the bridge's start (VL_SWAP)
    sessions: SessionBook  # Claude Code's sessions
    held: int  # generation requests waiting for vLLM's start now (VL_START_HOLD)


@dataclass(frozen=True)
class Sources:
    """Everything the page shows beside the monitor's view of vLLM, each from its own home."""
    relay: RelayFacts | None = None
    idle: PodStopper | None = None  # VL_IDLE_STOP (podstop.py)
    journal: Uploader | None = None  # VL_JOURNAL_REPO (journal.py)
    environ: Mapping[str, str] = field(default_factory=dict)  # RUNPOD_POD_ID: the pod's address for Claude Code
    swap_set: tuple[tuple[str, int | None], ...] = ()  # a swap set's models and contexts, for Claude Code


def snapshot(monitor: Monitor, full: bool, lines: int = TAIL_LINES, sources: Sources = Sources()) -> dict:
    phase, why = monitor.phase(full)
    starts = monitor.starts or len((monitor.state.get("vllm") or {}).get("starts") or [])
    relay = sources.relay
    status = {
        "image": monitor.identity or None,
        "phase": phase, "why": why, "phase_since": utc_stamp(monitor.phase_since),
        "uptime_s": round(time.time() - float(monitor.state.get("started_at") or monitor.began)),
        "restarts": max(0, starts - 1),
        "idle_stop": sources.idle.snapshot() if sources.idle else None,  # VL_IDLE_STOP (podstop.py)
    }
    if relay is not None and relay.swapper is not None:  # VL_SWAP: how it swaps, each model's state, the last swaps
        status["swap"] = relay.swapper.snapshot()
    if not full:
        if status["idle_stop"]:  # when it stops, for anyone who can reach the page; the API's errors with the key
            status["idle_stop"] = {k: status["idle_stop"][k] for k in PUBLIC_IDLE}
        else:
            del status["idle_stop"]
        status["more"] = ("decisions, GPUs, queue and vLLM's log are shown only on a pod with an API key "
                          "(VLLM_API_KEY), to requests that carry it")
        return _redact_all(monitor.redact, status)
    queue = metrics.figures(monitor.samples[-1], monitor.samples[0] if len(monitor.samples) > 1 else None) \
        if monitor.samples and monitor.healthy else None
    status.update({
        "health": {"ok": monitor.healthy, "last_ok_s_ago": None if monitor.last_ok is None else
                   round(time.monotonic() - monitor.last_ok, 1), "problem": monitor.health_problem,
                   "watchdog_s": monitor.watchdog_s},
        "queue": queue,
        "held_for_start": relay.held if relay is not None else 0,  # VL_START_HOLD (relay.py)
        "gpus": monitor.gpus, "gpus_problem": monitor.gpus_problem,
        "vllm": {"argv": _argv(monitor), "pid": (monitor.state.get("vllm") or {}).get("pid"),
                 "exit": monitor.vllm_exit()},
        "decisions": monitor.state.get("decisions"),
        "previous_run": monitor.state.get("previous_run"),
        # VL_CACHE_REPO: restored, cold or published, and why (launcher/compilecache.py writes it)
        "compile_cache": read_state(os.path.join(monitor.run_dir, COMPILE_CACHE), "compile_cache_status") or None
        if monitor.run_dir else None,
        "journal": sources.journal.status() if sources.journal else None,
        "log": {"file": os.path.join(monitor.run_dir, LOG) if monitor.run_dir else None,
                "lines": list(monitor.tail)[-lines:] if lines else []},
        "set_aside": set_aside(monitor),  # after the reads above: a file they set aside is listed too
    })
    status = _redact_all(monitor.redact, status)
    # Claude Code's settings for this pod (docs/quickstart.md, step 5), from the state's argv, which the launcher
    # already redacted: not redacted again, since `ANTHROPIC_AUTH_TOKEN="$VLLM_API_KEY"` names the key, never holds it
    status["claude_code"] = for_pod(monitor.state, sources.environ, sources.swap_set)
    # Claude Code's, by the session id its client sent (sessions.py): redacted as every string a client may set
    status["sessions"] = _redact_all(monitor.redact, relay.sessions.snapshot()) if relay is not None else []
    return status


def _argv(monitor: Monitor) -> list[str] | None:
    """vLLM's command, option/value pairs redacted (the launcher wrote it redacted; a page never trusts that)."""
    argv = monitor.state.get("argv")
    return monitor.redact.argv([str(token) for token in argv]) if isinstance(argv, list) else None


def set_aside(monitor: Monitor) -> list[dict]:
    """The volume's files not used (untrusted.py): the launcher's (state.json) and the bridge's own, once each."""
    found = {entry["file"]: entry["why"] for entry in monitor.state.get("set_aside") or []}
    found.update({entry["file"]: entry["why"] for entry in set_aside_files()})
    return [{"file": file, "why": why} for file, why in found.items()]


def _redact_all(redact: Callable[[str], str], value):
    if isinstance(value, str):
        return safe(value, PAGE_LIMIT, redact)
    if isinstance(value, list):
        return [_redact_all(redact, item) for item in value]
    if isinstance(value, dict):
        return {key: _redact_all(redact, item) for key, item in value.items()}
    return value


def render_text(status: dict) -> str:
    """The status for people: what a browser or `curl` shows, and what the journal uploads."""
    image = status.get("image") or {}
    out = [f"prebake {image.get('variant', '?')} revision {image.get('revision', '?')}, vLLM {image.get('vllm', '?')}, "
           f"CUDA {image.get('cuda', '?')}, built {image.get('created', '?')}",
           f"phase: {status['phase']} since {status['phase_since']} ({status['why']})",
           f"uptime {status['uptime_s']} s, restarts {status['restarts']}"]
    if status.get("idle_stop"):
        out.append(idle_line(status["idle_stop"]))
    if status.get("held_for_start"):
        out.append(f"held: {status['held_for_start']} request(s) waiting for vLLM's start (VL_START_HOLD)")
    if status.get("swap"):
        out += _swap_lines(status["swap"])
    if "more" in status:
        return "\n".join(out + [status["more"]]) + "\n"
    health = status["health"]
    out.append(f"health: {'ok' if health['ok'] else health['problem'] or 'not answering yet'}; watchdog "
               f"{str(health['watchdog_s']) + ' s' if health['watchdog_s'] else 'off'}")
    queue = status.get("queue")
    if queue:
        out.append(_queue_line(queue))
    for gpu in status.get("gpus") or []:
        out.append(f"gpu {gpu['index']} {gpu['name']}: {gpu['memory_used_mib']} / {gpu['memory_total_mib']} MiB")
    if status.get("gpus_problem"):
        out.append(f"gpus: {status['gpus_problem']}")
    claude_code = status.get("claude_code")
    if claude_code:
        out.append("Claude Code on this pod (paste into a shell where VLLM_API_KEY holds the pod's key):")
        out += ["    " + line for line in claude_code["paste"].splitlines()]
    if status.get("sessions"):
        out.append("Claude Code sessions (prefix cache):")
        out += sessions.render_lines(status["sessions"])
    previous = status.get("previous_run")
    if previous:
        out.append(f"previous run: {describe_previous(previous)}")
    if status.get("journal"):
        out.append(f"journal: {json.dumps(status['journal'])}")
    cache = status.get("compile_cache")
    if cache:
        restore, publish = cache.get("restore") or {}, cache.get("publish") or {}
        out.append(f"compile cache ({cache.get('where', '?')}): {restore.get('state', '?')} ({restore.get('why', '')}); "
                   f"publish: {publish.get('state', '?')} ({publish.get('why', '')})")
    for entry in status.get("set_aside") or []:
        out.append(f"set aside (read as absent): {entry['file']}: {entry['why']}")
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


def _queue_line(queue: dict) -> str:
    """vLLM's queue; a figure not known yet (the throughput needs two samples, METRICS_EVERY_S apart: just after
    serving starts, or across a restart) is said so, never printed as None."""
    kv = queue["kv_cache_usage_percent"]
    line = (f"queue: running {queue['running']}, waiting {queue['waiting']}, KV cache "
            f"{'not reported' if kv is None else f'{kv}%'}, ")
    if queue["over_s"] is None:
        return line + "throughput not measured yet (it needs two of vLLM's /metrics readings)"
    return line + (f"prompt {queue['prompt_tokens_per_s']} tokens/s, generation {queue['generation_tokens_per_s']} "
                   f"tokens/s (over {queue['over_s']} s)")


def _swap_lines(swap: dict) -> list[str]:
    models = ", ".join(f"{name} {state}" for name, state in swap["models"].items())
    out = [f"swap ({swap['mode']}): {models}; {swap['swaps']} swap(s)"]
    out += [f"  swap {s['from']} -> {s['to']} at {s['at']}: {s['seconds']} s ({s['how']})" for s in swap["last_swaps"]]
    out += [f"  {name} failed: {message}" for name, message in swap["failed"].items()]
    return out


def idle_line(idle: dict) -> str:
    after = f"{idle['after_s'] / 60:g} min"
    if idle["idle_s"] is None:
        line = f"idle stop: after {after} idle; awake ({idle['awake']})"
    else:
        line = (f"idle stop: idle {idle['idle_s']:.0f} s of {after}; the pod asks RunPod to stop it at "
                f"{idle['stops_at']}")
    if idle.get("stop_requested_at"):
        line += f"; RunPod accepted a stop at {idle['stop_requested_at']}"
    if idle.get("last_error"):  # absent from a page without a key
        line += f"; last attempt: {idle['last_error']}"
    return line


def _stamp(when) -> str:
    return utc_stamp(float(when)) if isinstance(when, (int, float)) else "?"


def describe_previous(previous: dict) -> str:
    """The previous run for people: when it started, how it ended (UTC times, not epoch seconds), its log."""
    text = f"started {_stamp(previous.get('started_at'))}"
    if previous.get("image"):
        text += f" (image revision {previous['image']})"
    ended = previous.get("exit")
    if isinstance(ended, dict):
        code = ended.get("code")
        text += (f"; exited {'?' if code is None else code} at {_stamp(ended.get('at'))}: "
                 f"{ended.get('why') or 'no reason recorded'}")
    else:
        text += ("; no exit recorded: the container was killed (SIGKILL, a host restart) before the launcher "
                 "could write it")
    return text + f"; its log: {previous.get('log_file') or '?'}"


class StatusPage:
    """The ASGI layer that answers the status paths, behind auth.KeyCheck (which answered a request without the key),
    and passes every other request on."""

    def __init__(self, app, monitor: Monitor, sources: Sources) -> None:
        self.app, self.monitor, self.sources = app, monitor, sources

    async def __call__(self, scope, receive, send) -> None:
        form = PATHS.get(scope["path"])
        if form is None or wants_page(scope):  # a browser: the page for a person (welcome.py), never the status
            await self.app(scope, receive, send)
        else:
            await self.answer(scope, send, form)

    async def journal_text(self) -> str:
        """The journal's upload: the page for people with every detail, then more of vLLM's log."""
        await self.monitor.refresh_gpus()
        return with_log(render_text(snapshot(self.monitor, full=True, lines=0, sources=self.sources)), self.monitor.tail)

    async def answer(self, scope, send, form: str) -> None:
        monitor = self.monitor
        response = Response.for_request(send, scope["method"], scope["path"])
        if scope["method"] not in ("GET", "HEAD"):
            await response.answer(405, error_body("openai", "the status page answers GET only", 405),
                                  [*NO_STORE, (b"allow", b"GET, HEAD")])
            return
        # auth.KeyCheck answered a request without this pod's key (401): what reaches here may see the page
        full = monitor.key is not None
        lines = TAIL_LINES
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        asked = query.get("lines", [""])[0]
        if asked.isascii() and asked.isdigit():  # "²".isdigit() is True, and int("²") raises
            # more digits than KEPT_LINES has is more than it: int() of 4,300 digits or more would raise
            digits = asked.lstrip("0") or "0"
            lines = KEPT_LINES if len(digits) > len(str(KEPT_LINES)) else min(int(digits), KEPT_LINES)
        if full:  # at most a second for nvidia-smi: the page answers, with the GPUs of the last reading if need be
            try:
                await asyncio.wait_for(asyncio.shield(monitor.refresh_gpus()), 1.0)
            except asyncio.TimeoutError:
                pass
        status = snapshot(monitor, full, lines, self.sources)
        head = scope["method"] == "HEAD"
        if form == "json":
            await response.answer(200, utf8(json.dumps(status, indent=1, ensure_ascii=False) + "\n"), NO_STORE,
                                  head=head)
        else:
            await response.answer(200, utf8(render_text(status)), NO_STORE, b"text/plain; charset=utf-8", head=head)
