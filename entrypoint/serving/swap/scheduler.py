"""The swap scheduler: which model the pod serves, who waits for which, and when to swap.

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
Each model is one SwapModel (model.py: its facts and upstream, its state, its waiting requests, its last failed swap);
the requests any model may answer wait in the Swapper's own `any_model`; where the pod's swapping stands is one
SwapProgress (link.py), its phase moved only along modelstate.SWAP_PHASES. A move that finds another state than the one it expects
is refused and comes back to its caller, who logs it and says what follows.
How a swap changes the model is its backend's: restart.py (the launcher stops one vLLM and starts another)
or sleep.py (every model its own vLLM, asleep but one). Both share link.py (the control channel to the
launcher, vLLM's /health while a model loads). The processes themselves belong to the launcher
(launcher/supervise.py, launcher/swap/orders.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from functools import partial
from typing import Callable, Protocol

import aiohttp

from ...claudecode_wire import is_background
from ...contract import SwapConfig
from ...modelnames import NameMap, ServedNames
from ...modelstate import ModelState, SwapPhase
from ...swapchannel import GiveUp, Serving
from ..health import Health
from .link import LauncherLink, SwapProgress
from .model import SwapFailed, SwapModel, Waiting
from .restart import RestartSwaps
from .sleep import SleepSwaps

HISTORY = 10  # the last swaps the status page shows


class Backend(Protocol):
    """How a swap changes the model: RestartSwaps or SleepSwaps."""
    background_swaps: bool  # whether Claude Code's background calls may cause a swap
    mode: str  # as the status page says it (contract.swap_mode)

    async def warm_up(self) -> None:
        """At the bridge's start, before the first swap (the scheduler serves the queues once it returns)."""

    async def switch(self, model: str) -> tuple[str | None, str, str]:
        """Bring `model` up: (None once it answers its health check, else the cause; how, for the swap's history;
        where the swap's time went, for its log line)."""


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
        self.models = {m.name: SwapModel.of(m) for m in config.models}  # each model's facts, state, waiters, failure
        # indexes over the models: which model a client's name means, and what each one's vLLM answers to
        self.names = NameMap.of(self.models)
        self.served = ServedNames({name: model.served for name, model in self.models.items()})
        # sleep mode starts every model once before any swap (SleepSwaps.warm_up)
        self.progress = SwapProgress(config.models[0].name,
                                     phase=SwapPhase.WARMING if config.sleep_level else SwapPhase.SERVING)
        if refusal := self.models[self.progress.loaded].swap_state((ModelState.AVAILABLE,), ModelState.STARTING,
                                                                   "the launcher starts it with the pod"):
            log(f"swap: {refusal}; the pod starts all the same")
        self.link = LauncherLink(config, control_fd, health, self.models, self.progress, log)
        kind = SleepSwaps if config.sleep_level else RestartSwaps
        self.backend: Backend = kind(config, self.link, health, self.models, self.progress, log)
        self.any_model = Waiting()  # the requests any model may answer (they name none of the set)
        self.active: set[Ticket] = set()
        self.worker: asyncio.Task | None = None
        self.warming: asyncio.Task | None = None
        self.drained = asyncio.Event()
        self.swaps = 0
        self.history: deque[dict] = deque(maxlen=HISTORY)  # the last swaps: from, to, how, seconds

    @property
    def loaded(self) -> str:
        """The model vLLM runs, or is starting."""
        return self.progress.loaded

    @property
    def target(self) -> str | None:
        """The model a swap in progress is bringing up."""
        return self.progress.target

    async def start(self, session: aiohttp.ClientSession) -> None:
        self.link.session = session
        await self.link.open()
        self.warming = asyncio.ensure_future(self.warm_up())

    async def warm_up(self) -> None:
        await self.backend.warm_up()
        self.kick()  # the requests that came meanwhile

    async def stop(self) -> None:
        for task in (self.worker, self.warming):
            if task:
                task.cancel()
        self.link.close()

    def upstream(self, model: str) -> str:
        return self.link.upstream(model)

    # -- what the bridge asks ------------------------------------------------------------------------
    def unavailable(self) -> str | None:
        """Why a request that names no model cannot be relayed now (a swap in progress), or None."""
        progress = self.progress
        if progress.broken:
            return progress.broken
        if progress.warming:
            return (f"starting the swap set's models once each ({progress.target or progress.loaded} now), before "
                    "the first swap. Generation requests wait for it (with heartbeats); retry this one in a minute.")
        if progress.target:
            return (f"model swap in progress on this pod: {progress.source or progress.loaded} -> {progress.target}. "
                    "Generation requests wait for it (with heartbeats); retry this one in a minute.")
        return None

    def model_list(self) -> bytes:
        serving = self.target is None and not self.progress.broken
        data = [{"id": m.name, "object": "model", "created": 0, "owned_by": "prebake", "root": m.repo,
                 "parent": None, "max_model_len": m.max_model_len, "permission": [],
                 "loaded": m.name == self.loaded and serving,
                 "status": ("loading" if m.name == self.target else
                            "loaded" if m.name == self.loaded and serving else "available"), "catalogue_key": m.key}
                for m in (model.target for model in self.models.values())]
        return json.dumps({"object": "list", "data": data}).encode()

    async def admit(self, path: str, requested: str | None, body: bytes | None) -> Ticket:
        """Wait until the request may go to vLLM; raises SwapFailed when it cannot be served.

        requested: the request's `model` (the bridge reads it as the body streams in: serving/streamflag.py);
        body: the whole body when it is small enough to be a background call (BACKGROUND_MAX_BYTES) and Claude
        Code sent it (its `anthropic-beta: claude-code-*`: an SDK's structured-output or no-thinking request is
        always answered by the model it names), else None.
        """
        model = self.names.model(requested)
        if self.progress.broken:
            raise SwapFailed(self.progress.broken)
        refused = self.models[model].refused_for() if model else None
        if refused:
            raise SwapFailed(refused)
        if model and model != self.loaded and model != self.target and not self.models[model].waiting \
                and not self.backend.background_swaps and is_background(path, body):
            self.log(f"swap: background call for {model} answered by {self.target or self.loaded}: "
                     "background calls never swap")
            model = None
        if not self.pending() and (model is None or model == self.loaded):
            admitted = self.ticket(self.loaded, requested)
            admitted.task = asyncio.current_task()
            return admitted
        queue = self.any_model if model is None else self.models[model].waiting
        waiter = queue.add(requested)
        self.kick()
        try:
            admitted = await waiter
        except asyncio.CancelledError:  # the client left while waiting
            queue.leave(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                waiter.result().release()
            raise
        admitted.task = asyncio.current_task()
        return admitted

    def hold_loaded(self) -> Ticket | None:
        """A ticket on the loaded model for a request that names none the bridge reads and cannot wait with heartbeats
        (relay.TICKETED_PATHS); None while a swap is pending or under way, or the set is broken."""
        if self.pending() or self.progress.broken:
            return None
        return self.ticket(self.loaded, None)

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
        return self.progress.warming or self.target is not None or \
            any(m.waiting for m in self.models.values() if m.name != self.loaded)

    def next_model(self) -> str | None:
        """The model, other than the loaded one, whose oldest waiting request came first."""
        oldest = [(m.waiting.oldest_arrival(), m.name) for m in self.models.values()
                  if m.waiting and m.name != self.loaded]
        return min(oldest)[1] if oldest else None

    def kick(self) -> None:
        if self.progress.warming:
            return  # warm_up serves the queues when it is over
        if self.worker is None or self.worker.done():
            self.worker = asyncio.ensure_future(self.work())

    def serve(self, model: str) -> None:
        """`model` answers: the requests waiting for it, then those any model may answer, get tickets on it."""
        for queue in (self.models[model].waiting, self.any_model):
            queue.serve(partial(self.ticket, model))

    def fail_all(self, message: str) -> None:
        """No swap can be made: every waiting request gets `message`."""
        for queue in (*(m.waiting for m in self.models.values()), self.any_model):
            queue.fail(message)

    async def work(self) -> None:
        while True:
            target = self.next_model()
            if target is None:
                self.serve(self.loaded)
                return
            await self.drain(target)
            if not self.models[target].waiting:
                continue  # its callers left while the loaded model finished: no swap for nobody
            previous = self.loaded
            refusal = self.progress.enter((SwapPhase.SERVING,), SwapPhase.SWAPPING, f"{previous} -> {target}")
            if refusal is not None:  # broken (or a bug): no swap can be made, so nobody waits for one
                self.log(f"swap: {refusal}")
                self.fail_all(self.progress.broken or f"no swap can be made now ({refusal})")
                return
            cause = await self.switch(target)
            if cause is None:
                self.phase((SwapPhase.SWAPPING,), SwapPhase.SERVING)
                self.serve(target)
                continue
            message = f"swap to model {target} failed: {cause}. The pod goes back to {previous}; see its log."
            self.log(f"swap: {message}")
            self.phase((SwapPhase.SWAPPING,), SwapPhase.RETURNING, cause)
            self.models[target].swap_failed(message)
            back = await self.switch(previous)
            if back is not None:
                broken = (f"no model is served: swapping to {target} failed ({cause}), and {previous} did not come "
                          f"back ({back}). The container's log says why.")
                refusal = self.progress.break_down((SwapPhase.RETURNING,), broken)
                if refusal is not None:  # a bug: the pod is broken all the same
                    self.log(f"swap: {refusal}")
                self.log(f"swap: error: {broken}")
                self.fail_all(broken)
                # No model answers, and nothing here would ever clear that: the launcher ends the container
                # (with the exit code of the previous vLLM when it exited, else after stopping it), so that
                # RunPod restarts the pod rather than let it answer 503 for ever.
                self.link.command(GiveUp(previous, broken))
                return
            self.phase((SwapPhase.RETURNING,), SwapPhase.SERVING, f"{previous} came back")

    def phase(self, expected: tuple[SwapPhase, ...], new: SwapPhase, why: str = "") -> None:
        """The pod's swap phase moves along modelstate.SWAP_PHASES; a refused move (a bug) is logged, the swap goes on."""
        refusal = self.progress.enter(expected, new, why)
        if refusal is not None:
            self.log(f"swap: {refusal}")

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
        """Bring `model` up with the backend: None once it answers its health check, else the cause."""
        began, previous = time.monotonic(), self.loaded
        self.progress.swap_begins(model)
        self.log(f"swap: {previous} -> {model}")
        try:
            cause, how, spent = await self.backend.switch(model)
        finally:
            self.progress.swap_ends()
        if cause is not None:
            return cause
        self.progress.now_loaded(model)
        self.link.command(Serving(model))
        self.swaps += 1
        total = time.monotonic() - began
        self.history.append({"from": previous, "to": model, "how": how, "seconds": round(total, 3),
                             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        self.log(f"swap: {model} answers; swap {self.swaps} took {total:.2f} s ({spent})")
        return None

    def state_text(self, name: str) -> str:
        state = self.models[name].state
        return f"asleep (level {self.config.sleep_level})" if state is ModelState.ASLEEP else state.value

    def snapshot(self) -> dict:
        """The status page's `swap` block."""
        return {"mode": self.backend.mode, "phase": self.progress.phase.value,
                "loaded": self.loaded, "target": self.target, "swaps": self.swaps,
                "models": {name: self.state_text(name) for name in self.models},
                "failed": {m.name: m.failure[1] for m in sorted((m for m in self.models.values() if m.failure),
                                                                 key=lambda m: m.failure[0])},  # as they failed
                "last_swaps": list(self.history)}

