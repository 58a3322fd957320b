"""The swap policy: which model vLLM runs, who waits for which, and when to swap.

- A request naming another model of the set waits (the bridge sends heartbeats meanwhile) and makes the
  pod swap; every request waiting for the same model shares that one swap.
- Requests already running on the loaded model finish first (VL_SWAP_DRAIN, then an API error); requests
  for the loaded model that arrive while a swap is pending wait too, so that the models take turns: a
  model that has just loaded serves its whole queue before the next swap (no thrashing).
- With restart-based swaps (minutes each), Claude Code's background calls never cause a swap: naming a model
  that is not loaded (and not about to be), they are answered by the loaded one, under its name. Only Claude
  Code's (its `anthropic-beta: claude-code-*` header): another client's request always gets the model it
  names. With sleep mode a swap takes about a second, and every request gets the model it names.
- A `claude-*` name that no model of the set answers to (Claude Code's own model names) never causes a swap
  either: the loaded model answers it, under its own name.
- A swap that fails (vLLM exits, or no health within VL_SWAP_LOAD) answers its waiting requests with an
  error naming the model and the cause, and the launcher starts the previous model again.
- With sleep mode (SwapConfig.sleep_level 1 or 2, launcher/sleepmode.py), every model runs its own vLLM on its
  own port: each is started once at the pod's start, one after another, and put to sleep; a swap then puts the
  loaded one to sleep and wakes the other (level 2: its weights reloaded from disk). Two are never awake at
  once on the GPU (a wake that ran out of memory left that vLLM broken). A wake that fails restarts that
  model's vLLM; a model that fails to sleep is stopped. /sleep, /wake_up and the rest of vLLM's development
  endpoints are asked here, on vLLM's internal port: the bridge never relays them (auth.INSIDE_ONLY).
The processes themselves belong to the launcher (supervise.py); this module asks it over the control
channel and polls vLLM's /health.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import deque
from typing import Callable

import aiohttp

from ..contract import (EVENT_EXITED, EVENT_STARTED, EVENT_STOPPED, OP_GIVE_UP, OP_SERVING, OP_START, OP_STOP,
                        OP_SWITCH, SwapConfig, message_line, swap_mode)
from .health import Health
from ..modelnames import NameMap, ServedNames, is_background

ANY = ""  # the queue of requests any model may answer
HEALTH_POLL_S = 0.1  # a local GET; the swap's overhead beyond vLLM's own start is at most this
# A model whose swap failed is refused at once for this long: SDKs and Claude Code retry errors, and each
# retry would otherwise stop the working model for another failing start of minutes.
FAILED_SWAP_HOLD_S = 300.0
# Sleep mode: a level-1 sleep copies the weights to pinned host RAM (the first one took 13 s on an H200 for an
# 8B-like model, later ones 0.4 s), a wake copies them back; past these, the vLLM is taken for broken.
SLEEP_TIMEOUT_S = 120.0
WAKE_TIMEOUT_S = 120.0
HISTORY = 10  # the last swaps the status page shows


class SwapFailed(Exception):
    """The request cannot be served: the message says which model and why."""

    def __init__(self, message: str, kind: str = "service_unavailable", code: int = 503) -> None:
        super().__init__(message)
        self.kind, self.code = kind, code


class Ticket:
    """One request admitted to the loaded model; released when its answer is over."""

    def __init__(self, owner: Swapper, model: str, requested: str | None) -> None:
        self.owner, self.model, self.requested = owner, model, requested
        self.task: asyncio.Task | None = None  # the bridge's relay of this request
        self.reason = ""  # set when a swap's drain time ran out: the relay was cancelled for it

    def rename(self) -> str | None:
        """The name the request's body must carry instead of the one it sent, or None: a background call for
        another model of the set, and a `claude-*` name this model does not serve, both name this model."""
        named = self.owner.names.model(self.requested)
        if named and named != self.model:
            return self.model
        return self.owner.served.rename(self.requested, self.model)

    def evict(self, reason: str) -> None:
        """Stop the relay of this request: the bridge answers it with `reason` in the API's error form."""
        self.reason = reason
        if self.task:
            self.task.cancel()

    def release(self) -> None:
        self.owner.release(self)


class Swapper:
    def __init__(self, config: SwapConfig, control_fd: int, health: Health, log: Callable[[str], None]) -> None:
        self.config, self.health, self.log = config, health, log  # vLLM's /health: the bridge's one view of it
        self.models = {m.name: m for m in config.models}
        self.names = NameMap.of(self.models)
        self.served = ServedNames({m.name: (m.served or tuple(NameMap.of([m.name]).by_name)) for m in config.models})
        self.control_fd = control_fd
        self.loaded = config.models[0].name  # the model vLLM runs, or is starting
        self.target: str | None = None  # the model a swap in progress is bringing up
        self.source: str | None = None  # the model a swap in progress replaces (self.loaded turns to the target)
        self.broken: str | None = None  # why no model can be served (the previous one failed to come back)
        self.failed: dict[str, tuple[float, str]] = {}  # model -> (when its swap failed, the message)
        self.active: set[Ticket] = set()
        # model name (or ANY) -> (waiter, arrival time, the name the request sent), oldest first
        self.queues: dict[str, deque[tuple[asyncio.Future, float, str | None]]] = {}
        self.worker: asyncio.Task | None = None
        self.events: asyncio.Queue = asyncio.Queue()
        self.drained = asyncio.Event()
        self.swaps = 0
        # What each model's vLLM is doing: starting, awake, asleep (sleep mode), down (no process), failed (why)
        self.states: dict[str, str] = {m.name: "available" for m in config.models}
        self.states[self.loaded] = "starting"
        self.history: deque[dict] = deque(maxlen=HISTORY)  # the last swaps: from, to, how, seconds
        self.warming = bool(config.sleep_level)  # sleep mode: the other models start once before any swap
        self.started_at: float | None = None  # when the vLLM being brought up started (run_until_healthy)
        self.session: aiohttp.ClientSession | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        reader, self.writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=self.control_fd))
        self.reader_task = asyncio.ensure_future(self.read_events(reader))
        if self.warming:
            self.worker = asyncio.ensure_future(self.warm_up())
        else:
            self.first_answer = asyncio.ensure_future(self.awake_at_first_answer())

    async def awake_at_first_answer(self) -> None:
        await self.health.answered.wait()
        if self.states.get(self.loaded) == "starting":
            self.states[self.loaded] = "awake"

    async def stop(self) -> None:
        for task in (self.worker, self.reader_task, getattr(self, "first_answer", None)):
            if task:
                task.cancel()

    async def read_events(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == EVENT_EXITED and event.get("model") in self.states \
                    and event.get("model") not in (self.target, self.loaded):
                # a sleeping model's vLLM died: the next swap to it starts it again
                self.states[event["model"]] = "down"
                self.log(f"swap: vLLM for {event['model']} (asleep) exited with code {event.get('code')}; "
                         "a swap to it starts it again")
            await self.events.put(event)
        await self.events.put({"event": "closed"})

    def command(self, op: str, model: str, why: str | None = None) -> None:
        message = {"op": op, "model": model, **({"why": why} if why else {})}
        self.writer.write(message_line(message))

    # -- what the bridge asks ------------------------------------------------------------------------
    def unavailable(self) -> str | None:
        """Why a request that names no model cannot be relayed now (a swap in progress), or None."""
        if self.broken:
            return self.broken
        if self.warming:
            return (f"starting the swap set's models once each ({self.target or self.loaded} now), before the first "
                    "swap. Generation requests wait for it (with heartbeats); retry this one in a minute.")
        if self.target:
            return (f"model swap in progress on this pod: {self.source or self.loaded} -> {self.target}. "
                    "Generation requests wait for it (with heartbeats); retry this one in a minute.")
        return None

    def model_list(self) -> bytes:
        data = [{"id": m.name, "object": "model", "created": 0, "owned_by": "prebake", "root": m.repo,
                 "parent": None, "max_model_len": m.max_model_len, "permission": [],
                 "loaded": m.name == self.loaded and self.target is None and not self.broken,
                 "status": ("loading" if m.name == self.target else
                            "loaded" if m.name == self.loaded and not self.target and not self.broken else
                            "available"), "catalogue_key": m.key}
                for m in self.config.models]
        return json.dumps({"object": "list", "data": data}).encode()

    async def admit(self, path: str, requested: str | None, body: bytes | None) -> Ticket:
        """Wait until the request may go to vLLM; raises SwapFailed when it cannot be served.

        requested: the request's `model` (the bridge reads it as the body streams in: serving/streamflag.py);
        body: the whole body when it is small enough to be a background call (BACKGROUND_MAX_BYTES) and Claude
        Code sent it (its `anthropic-beta: claude-code-*`: an SDK's structured-output or no-thinking request is
        always answered by the model it names), else None.
        """
        model = self.names.model(requested)
        if self.broken:
            raise SwapFailed(self.broken)
        if model in self.failed:
            when, message = self.failed[model]
            if time.monotonic() - when < FAILED_SWAP_HOLD_S:
                raise SwapFailed(f"{message} (not tried again for {FAILED_SWAP_HOLD_S - time.monotonic() + when:.0f} s)")
            del self.failed[model]
        if model and model != self.loaded and model != self.target and not self.queues.get(model) \
                and not self.config.sleep_level and is_background(path, body):
            self.log(f"swap: background call for {model} answered by {self.target or self.loaded}: "
                     "background calls never swap")
            model = None
        wanted = model if model is not None else ANY
        if not self.pending() and (wanted == ANY or wanted == self.loaded):
            admitted = self.ticket(self.loaded, requested)
            admitted.task = asyncio.current_task()
            return admitted
        waiter = asyncio.get_running_loop().create_future()
        self.queues.setdefault(wanted, deque()).append((waiter, time.monotonic(), requested))
        self.kick()
        try:
            admitted = await waiter
        except asyncio.CancelledError:  # the client left while waiting
            queue = self.queues.get(wanted, deque())
            for entry in list(queue):
                if entry[0] is waiter:
                    queue.remove(entry)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                waiter.result().release()
            raise
        admitted.task = asyncio.current_task()
        return admitted

    def ticket(self, model: str, requested: str | None) -> Ticket:
        ticket = Ticket(self, model, requested)
        self.active.add(ticket)
        self.drained.clear()
        return ticket

    def release(self, ticket: Ticket) -> None:
        self.active.discard(ticket)
        if not self.active:
            self.drained.set()

    # -- the policy ----------------------------------------------------------------------------------
    def pending(self) -> bool:
        return self.warming or self.target is not None or any(q for name, q in self.queues.items() if name not in (ANY, self.loaded))

    def next_model(self) -> str | None:
        """The model, other than the loaded one, whose oldest waiting request came first."""
        oldest = [(queue[0][1], name) for name, queue in self.queues.items()
                  if queue and name not in (ANY, self.loaded)]
        return min(oldest)[1] if oldest else None

    def kick(self) -> None:
        if self.warming:
            return  # warm_up serves the queues when it is over
        if self.worker is None or self.worker.done():
            self.worker = asyncio.ensure_future(self.work())

    def serve_queue(self, name: str, model: str) -> None:
        for waiter, _, requested in self.queues.pop(name, ()):
            if not waiter.done():
                waiter.set_result(self.ticket(model, requested))

    def fail_queue(self, name: str, message: str) -> None:
        for waiter, _, _ in self.queues.pop(name, ()):
            if not waiter.done():
                waiter.set_exception(SwapFailed(message))

    async def work(self) -> None:
        while True:
            target = self.next_model()
            if target is None:
                self.serve_queue(self.loaded, self.loaded)
                self.serve_queue(ANY, self.loaded)
                return
            await self.drain(target)
            if not self.queues.get(target):
                continue  # its callers left while the loaded model finished: no swap for nobody
            previous = self.loaded
            cause = await self.switch(target)
            if cause is None:
                self.serve_queue(target, target)
                self.serve_queue(ANY, target)
                continue
            message = f"swap to model {target} failed: {cause}. The pod goes back to {previous}; see its log."
            self.log(f"swap: {message}")
            self.failed[target] = (time.monotonic(), message)
            self.fail_queue(target, message)
            back = await self.switch(previous)
            if back is not None:
                self.broken = (f"no model is served: swapping to {target} failed ({cause}), and {previous} did not "
                               f"come back ({back}). The container's log says why.")
                self.log(f"swap: error: {self.broken}")
                for name in list(self.queues):
                    self.fail_queue(name, self.broken)
                # No model answers, and nothing here would ever clear that: the launcher ends the container
                # (with the exit code of the previous vLLM when it exited, else after stopping it), so that
                # RunPod restarts the pod rather than let it answer 503 for ever.
                self.command(OP_GIVE_UP, previous, self.broken)
                return

    async def drain(self, target: str) -> None:
        """Until the requests running on the loaded model are over, at most VL_SWAP_DRAIN seconds."""
        if not self.active:
            return
        self.log(f"swap: {len(self.active)} request(s) running on {self.loaded} finish before the swap to {target}")
        try:
            await asyncio.wait_for(self.drained.wait(), self.config.drain_s)
            return
        except asyncio.TimeoutError:
            pass
        reason = (f"this request on model {self.loaded} was still running VL_SWAP_DRAIN={self.config.drain_s:g} s "
                  f"after another model ({target}) was requested: it was stopped so that the pod could swap")
        self.log(f"swap: {len(self.active)} request(s) on {self.loaded} stopped after {self.config.drain_s:g} s")
        for ticket in list(self.active):
            ticket.evict(reason)
        await self.drained.wait()

    async def switch(self, model: str) -> str | None:
        """Bring `model` up: None once it answers its health check, else the cause."""
        if self.config.sleep_level:
            return await self.switch_sleeping(model)
        return await self.switch_restart(model)

    async def switch_restart(self, model: str) -> str | None:
        """Ask the launcher to run `model` instead of the loaded one; None once it answers, else the cause."""
        began, previous = time.monotonic(), self.loaded
        self.target, self.source = model, previous
        self.log(f"swap: {previous} -> {model}")
        stopped: list = []  # the launcher's "stopped" news: the old vLLM is gone, `model` is loading
        try:
            cause = await self.run_until_healthy(OP_SWITCH, model, stopped)
        finally:
            self.target = self.source = None
        if cause is not None:
            return cause
        stopped_s = stopped[0].get("seconds") if stopped else None
        self.command(OP_SERVING, model)
        self.swaps += 1
        total = time.monotonic() - began
        self.states.update({previous: "available", model: "awake"})
        self.remember(previous, model, "restart", total)
        self.log(f"swap: {model} answers; swap {self.swaps} took {total:.2f} s (stop {stopped_s} s, start to health "
                 f"{time.monotonic() - self.started_at:.2f} s)")
        return None

    def remember(self, previous: str, model: str, how: str, seconds: float) -> None:
        self.history.append({"from": previous, "to": model, "how": how, "seconds": round(seconds, 3),
                             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    # -- sleep mode ----------------------------------------------------------------------------------
    def upstream(self, model: str) -> str:
        return self.models[model].upstream or self.health.base

    async def warm_up(self) -> None:
        """Sleep mode, at the pod's start: the first model is loading (the launcher started it). Once it answers,
        it sleeps; every other model starts, answers and sleeps in turn; then the first one wakes."""
        first = self.loaded
        try:
            await self.health.answered.wait()
            self.states[first] = "awake"
            began = time.monotonic()
            await self.first_request(first)
            for name in list(self.models)[1:]:
                await self.sleep_awake(except_model=None)
                self.target = name
                cause = await self.start_or_stop(name)
                if cause is not None:
                    self.log(f"swap: {name} could not be started ({cause}); a request for it tries again")
                    continue
                await self.first_request(name)
                await self.sleep_awake(except_model=None)
            self.target = None
            cause, _ = await self.bring_up(first)
            if cause is not None:
                self.broken = (f"no model is served: {first} did not come back after the swap set's models started "
                               f"({cause}). The container's log says why.")
                self.log(f"swap: error: {self.broken}")
                self.command(OP_GIVE_UP, first, self.broken)
                return
            self.loaded = first
            self.command(OP_SERVING, first)
            states = ", ".join(f"{name} {state}" for name, state in self.states.items())
            self.log(f"swap: every model started once in {time.monotonic() - began:.1f} s ({states}): swaps now "
                     f"sleep and wake (level {self.config.sleep_level})")
        finally:
            self.target = None
            self.warming = False
        self.kick()

    async def first_request(self, model: str) -> None:
        """A two-token completion before the model first sleeps: what a vLLM does once, at its first request (ngram
        speculation's JIT: 2.1 s on an H200), is not paid by the first client after a swap."""
        began = time.monotonic()
        cause = await self.vllm_call(model, "POST", "/v1/completions", self.config.load_s,
                                     {"model": model, "prompt": "Hello", "max_tokens": 2})
        self.log(f"swap: {model}'s first request " + (f"took {time.monotonic() - began:.2f} s" if cause is None else
                                                       f"failed ({cause}); it still sleeps"))

    async def switch_sleeping(self, model: str) -> str | None:
        """Put whatever is awake to sleep, then wake `model` (or start it again when it has no vLLM, or when its
        wake fails); None once it answers its health check, else the cause."""
        began, previous = time.monotonic(), self.loaded
        self.target, self.source = model, previous
        self.log(f"swap: {previous} -> {model}")
        try:
            slept = await self.sleep_awake(except_model=model)
            woke_s = time.monotonic()
            cause, how = await self.bring_up(model)
            if cause is not None:
                return cause
        finally:
            self.target = self.source = None
        self.loaded = model
        self.command(OP_SERVING, model)
        self.swaps += 1
        total = time.monotonic() - began
        self.remember(previous, model, f"{swap_mode(self.config.sleep_level)} + {how}", total)
        self.log(f"swap: {model} answers; swap {self.swaps} took {total:.2f} s (sleep {slept:.2f} s, {how} to health "
                 f"{time.monotonic() - woke_s:.2f} s)")
        return None

    async def sleep_awake(self, except_model: str | None) -> float:
        """Every awake model but except_model goes to sleep (one at most: two are never awake together); one that
        does not is stopped. Returns the seconds it took."""
        began = time.monotonic()
        for name, state in list(self.states.items()):
            if name == except_model or state not in ("awake", "starting"):
                continue
            cause = await self.vllm_call(name, "POST", f"/sleep?level={self.config.sleep_level}", SLEEP_TIMEOUT_S)
            if cause is None:
                cause = await self.expect_sleeping(name, True)
            if cause is None:
                self.states[name] = "asleep"
                continue
            self.log(f"swap: {name} did not go to sleep ({cause}): its vLLM is stopped, and started again when "
                     "it is wanted")
            self.command(OP_STOP, name)
            await self.wait_stopped(name)
            self.states[name] = "down"
        return time.monotonic() - began

    async def bring_up(self, model: str) -> tuple[str | None, str]:
        """Wake `model`, or start its vLLM when it has none or the wake fails. (None once it answers, else the
        cause; how: wake, restart when the wake failed, start when it had no vLLM)."""
        how = "start"
        if self.states.get(model) == "asleep":
            cause = await self.wake(model)
            if cause is None:
                self.states[model] = "awake"
                return None, "wake"
            self.log(f"swap: {model} did not wake ({cause}): its vLLM is started again")
            how = "restart"
        return await self.start_or_stop(model), how

    async def start_or_stop(self, model: str) -> str | None:
        """Start `model`'s vLLM: awake once it answers (None), else failed and stopped, so that it holds no GPU
        memory the next model would need (the cause)."""
        cause = await self.start_model(model)
        self.states[model] = "awake" if cause is None else "failed"
        if cause is not None:
            self.command(OP_STOP, model)
            await self.wait_stopped(model)
        return cause

    async def wake(self, model: str) -> str | None:
        cause = await self.vllm_call(model, "POST", "/wake_up", WAKE_TIMEOUT_S)
        if cause is None and self.config.sleep_level == 2:  # the weights were discarded: read them again
            cause = await self.vllm_call(model, "POST", "/collective_rpc", self.config.load_s,
                                         {"method": "reload_weights"})
        if cause is None:
            cause = await self.expect_sleeping(model, False)
        if cause is None:
            self.health.follow(self.upstream(model))
            if not await self.healthy():
                cause = self.health.problem or "GET /health failed after the wake"
        return cause

    async def start_model(self, model: str) -> str | None:
        """Ask the launcher to (re)start `model`'s vLLM beside the sleeping others; None once it answers."""
        self.states[model] = "starting"
        self.health.follow(self.upstream(model))
        return await self.run_until_healthy(OP_START, model)

    async def run_until_healthy(self, op: str, model: str, stopped: list | None = None) -> str | None:
        """Send `op` for `model` (switch, start), then follow the launcher's news until that vLLM answers its
        health check (None), exits, or does not answer within VL_SWAP_LOAD of its start (the cause).
        stopped: gets the launcher's "stopped" event, when one comes (a switch stops the old vLLM first)."""
        while not self.events.empty():  # stale news of an earlier swap
            self.events.get_nowait()
        self.command(op, model)
        self.started_at, deadline = None, None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                event = await asyncio.wait_for(self.next_event(self.started_at is not None), timeout)
            except asyncio.TimeoutError:
                return f"vLLM did not answer its health check within VL_SWAP_LOAD={self.config.load_s:g} s"
            kind = event.get("event")
            if kind == "closed":
                return "the launcher's control channel closed"
            if kind == EVENT_STOPPED and stopped is not None:
                stopped.append(event)
                self.loaded = model  # the old vLLM is gone: `model` is what loads
            elif kind == EVENT_STARTED and event.get("model") == model:
                self.started_at = time.monotonic()
                deadline = self.started_at + self.config.load_s
            elif kind == EVENT_EXITED and event.get("model") == model:
                return f"vLLM exited with code {event.get('code')} while loading it"
            elif kind == "healthy":
                return None

    async def wait_stopped(self, model: str) -> None:
        """Until the launcher says `model`'s vLLM is stopped (VL_SWAP_STOP and the GPU's release, at most)."""
        try:
            while True:
                event = await asyncio.wait_for(self.events.get(), self.config.load_s)
                if event.get("event") in (EVENT_STOPPED, "closed") and event.get("model", model) == model:
                    return
        except asyncio.TimeoutError:
            self.log(f"swap: the launcher did not report {model}'s vLLM stopped")

    async def expect_sleeping(self, model: str, asleep: bool) -> str | None:
        answer: dict = {}
        cause = await self.vllm_call(model, "GET", "/is_sleeping", 10.0, into=answer)
        if cause is None and answer.get("is_sleeping") is not asleep:
            cause = f"GET /is_sleeping answered {answer.get('is_sleeping')!r}"
        return cause

    async def vllm_call(self, model: str, method: str, path: str, timeout_s: float, body: dict | None = None,
                        into: dict | None = None) -> str | None:
        """One call to `model`'s vLLM on its internal port; None when it answers 200, else what went wrong."""
        try:
            async with self.session.request(method, self.upstream(model) + path, json=body,
                                            timeout=aiohttp.ClientTimeout(total=timeout_s)) as answer:
                text = await answer.text()
                if answer.status != 200:
                    return f"{method} {path.split('?')[0]} answered {answer.status}: {text[:200]}"
                if into is not None:
                    found = json.loads(text or "{}")
                    into.update(found if isinstance(found, dict) else {})
        except asyncio.TimeoutError:
            return f"{method} {path.split('?')[0]} did not answer within {timeout_s:g} s"
        except (aiohttp.ClientError, ValueError) as err:
            return f"{method} {path.split('?')[0]} failed ({type(err).__name__})"
        return None

    def state_text(self, name: str) -> str:
        state = self.states.get(name, "available")
        return f"asleep (level {self.config.sleep_level})" if state == "asleep" else state

    def snapshot(self) -> dict:
        """The status page's `swap` block."""
        return {"mode": swap_mode(self.config.sleep_level),
                "loaded": self.loaded, "target": self.target, "swaps": self.swaps,
                "models": {name: self.state_text(name) for name in self.models},
                "failed": {name: message for name, (_, message) in self.failed.items()},
                "last_swaps": list(self.history)}

    async def next_event(self, poll_health: bool) -> dict:
        """The launcher's next event; once vLLM started, {"event": "healthy"} when its /health answers."""
        if not poll_health:
            return await self.events.get()
        while True:
            if not self.events.empty():
                return self.events.get_nowait()
            if await self.healthy():
                return {"event": "healthy"}
            try:
                return await asyncio.wait_for(self.events.get(), HEALTH_POLL_S)
            except asyncio.TimeoutError:
                continue

    async def healthy(self) -> bool:
        return await self.health.check(5.0)


def early_answer(swapper: Swapper, method: str, path: str, api: str | None) -> tuple[int, bytes] | None:
    """What the bridge answers itself with swapping on: the set on GET /v1/models, and a 503 for requests
    that name no model while a swap is in progress (generation requests wait for it instead)."""
    if method == "GET" and path == "/v1/models":
        return 200, swapper.model_list()
    reason = swapper.unavailable() if api is None else None
    if reason:
        return 503, json.dumps({"error": {"message": reason, "type": "service_unavailable", "param": None,
                                          "code": 503}}).encode()
    return None
