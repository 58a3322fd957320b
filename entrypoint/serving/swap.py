"""The swap policy: which model vLLM runs, who waits for which, and when to swap.

- A request naming another model of the set waits (the bridge sends heartbeats meanwhile) and makes the
  pod swap; every request waiting for the same model shares that one swap.
- Requests already running on the loaded model finish first (VL_SWAP_DRAIN, then an API error); requests
  for the loaded model that arrive while a swap is pending wait too, so that the models take turns: a
  model that has just loaded serves its whole queue before the next swap (no thrashing).
- Claude Code's background calls never cause a swap: naming a model that is not loaded (and not about to
  be), they are answered by the loaded one, under its name.
- A `claude-*` name that no model of the set answers to (Claude Code's own model names) never causes a swap
  either: the loaded model answers it, under its own name.
- A swap that fails (vLLM exits, or no health within VL_SWAP_LOAD) answers its waiting requests with an
  error naming the model and the cause, and the launcher starts the previous model again.
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

from ..contract import (EVENT_EXITED, EVENT_STARTED, EVENT_STOPPED, OP_GIVE_UP, OP_SERVING, OP_SWITCH, SwapConfig,
                        message_line)
from .health import Health
from ..modelnames import NameMap, ServedNames, is_background

ANY = ""  # the queue of requests any model may answer
HEALTH_POLL_S = 0.1  # a local GET; the swap's overhead beyond vLLM's own start is at most this
# A model whose swap failed is refused at once for this long: SDKs and Claude Code retry errors, and each
# retry would otherwise stop the working model for another failing start of minutes.
FAILED_SWAP_HOLD_S = 300.0


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
        self.session: aiohttp.ClientSession | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        reader, self.writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=self.control_fd))
        self.reader_task = asyncio.ensure_future(self.read_events(reader))

    async def stop(self) -> None:
        for task in (self.worker, self.reader_task):
            if task:
                task.cancel()

    async def read_events(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            try:
                await self.events.put(json.loads(line))
            except ValueError:
                continue
        await self.events.put({"event": "closed"})

    def command(self, op: str, model: str, why: str | None = None) -> None:
        message = {"op": op, "model": model, **({"why": why} if why else {})}
        self.writer.write(message_line(message))

    # -- what the bridge asks ------------------------------------------------------------------------
    def unavailable(self) -> str | None:
        """Why a request that names no model cannot be relayed now (a swap in progress), or None."""
        if self.broken:
            return self.broken
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
        body: the whole body when it is small enough to be a background call (BACKGROUND_MAX_BYTES), else None.
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
                and is_background(path, body):
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
        return self.target is not None or any(q for name, q in self.queues.items() if name not in (ANY, self.loaded))

    def next_model(self) -> str | None:
        """The model, other than the loaded one, whose oldest waiting request came first."""
        oldest = [(queue[0][1], name) for name, queue in self.queues.items()
                  if queue and name not in (ANY, self.loaded)]
        return min(oldest)[1] if oldest else None

    def kick(self) -> None:
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
        """Ask the launcher to run `model`; None once it answers its health check, else the cause."""
        began, previous = time.monotonic(), self.loaded
        self.target, self.source = model, previous
        self.log(f"swap: {previous} -> {model}")
        while not self.events.empty():  # stale news of an earlier swap
            self.events.get_nowait()
        self.command(OP_SWITCH, model)
        stopped_s, started_at = None, None
        try:
            deadline = None
            while True:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    event = await asyncio.wait_for(self.next_event(started_at is not None), timeout)
                except asyncio.TimeoutError:
                    return f"vLLM did not answer its health check within VL_SWAP_LOAD={self.config.load_s:g} s"
                kind = event.get("event")
                if kind == "closed":
                    return "the launcher's control channel closed"
                if kind == EVENT_STOPPED:
                    stopped_s = event.get("seconds")
                    self.loaded = model
                elif kind == EVENT_STARTED and event.get("model") == model:
                    started_at = time.monotonic()
                    deadline = started_at + self.config.load_s
                elif kind == EVENT_EXITED and event.get("model") == model:
                    return f"vLLM exited with code {event.get('code')} while loading it"
                elif kind == "healthy":
                    break
        finally:
            self.target = self.source = None
        self.command(OP_SERVING, model)
        self.swaps += 1
        total = time.monotonic() - began
        self.log(f"swap: {model} answers; swap {self.swaps} took {total:.2f} s (stop {stopped_s} s, start to health "
                 f"{time.monotonic() - started_at:.2f} s)")
        return None

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
