"""What both swap backends share: the bridge's end of the launcher's control channel, vLLM's /health while a model
loads, and where the pod's swapping stands (SwapProgress, its phase moved only along modelstate.PHASES).

The launcher's news moves the models' states (each a swapmodel.SwapModel): `started` makes a model starting;
`exited` of a model that is neither the loaded one nor the one coming (a sleeping vLLM died) makes it down. The rest
is the backend's to decide.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import aiohttp

from ..contract import EVENT_EXITED, EVENT_STARTED, EVENT_STOPPED, ModelState, SwapConfig, message_line
from ..modelstate import Refusal, SwapPhase, swap_phase
from .health import Health
from .swapmodel import MAY_EXIT, STARTED, SwapModel

HEALTH_POLL_S = 0.1  # a local GET; the swap's overhead beyond vLLM's own start is at most this
CLOSED = "closed"  # the pseudo-event of a control channel the launcher closed
HEALTHY = "healthy"  # the pseudo-event of a loading vLLM's first 200 on /health


@dataclass
class SwapProgress:
    """Where the pod's models stand, for the scheduler (serving/swap.py) and its backend alike."""
    loaded: str  # the model vLLM runs, or is starting
    target: str | None = None  # the model a swap in progress is bringing up
    source: str | None = None  # the model a swap in progress replaces (loaded may turn to the target before it answers)
    phase: SwapPhase = SwapPhase.SERVING  # moved only along modelstate.PHASES, by enter() and break_down()
    broken: str | None = None  # why no model can be served (set only by enter(BROKEN) and break_down())

    @property
    def warming(self) -> bool:
        """Sleep mode: the other models start once before any swap."""
        return self.phase is SwapPhase.WARMING

    def enter(self, expected: tuple[SwapPhase, ...], new: SwapPhase, why: str = "") -> Refusal | None:
        """The pod's phase becomes `new` when it is one of `expected` and PHASES has the move (None); else the
        Refusal, nothing changed, for the caller to handle. `why` of BROKEN is what every request is answered."""
        refusal = swap_phase(self.phase, expected, new, why)
        if refusal is None:
            self.phase = new
            if new is SwapPhase.BROKEN:
                self.broken = why
        return refusal

    def break_down(self, expected: tuple[SwapPhase, ...], why: str) -> Refusal | None:
        """No model can be served, for good: the phase becomes BROKEN as enter() would, and `why` is what every
        request is answered even when the phase was not one of `expected` (a bug: the Refusal is returned to be
        logged, the phase left as it was)."""
        refusal = self.enter(expected, SwapPhase.BROKEN, why)
        self.broken = why
        return refusal


class LauncherLink:
    """Commands to the launcher (contract's OP_*), its events in order, and the health checks of a loading vLLM."""

    def __init__(self, config: SwapConfig, control_fd: int, health: Health, models: Mapping[str, SwapModel],
                 progress: SwapProgress, log: Callable[[str], None]) -> None:
        self.config, self.control_fd, self.health, self.log = config, control_fd, health, log
        self.models, self.progress = models, progress
        self.upstreams = {m.name: m.upstream for m in config.models}
        self.events: asyncio.Queue = asyncio.Queue()
        self.session: aiohttp.ClientSession | None = None  # the bridge's, given at its start: calls to the vLLMs
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task | None = None
        self.started_at: float | None = None  # when the vLLM being brought up started (run_until_healthy)

    async def open(self) -> None:
        reader, self.writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=self.control_fd))
        self.reader_task = asyncio.ensure_future(self.read_events(reader))

    def close(self) -> None:
        if self.reader_task:
            self.reader_task.cancel()

    def upstream(self, model: str) -> str:
        """`model`'s vLLM: its own port with sleep mode, else the one vLLM's."""
        return self.upstreams[model] or self.health.base

    async def read_events(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            model = event.get("model")
            if event.get("event") == EVENT_EXITED and model in self.models \
                    and model not in (self.progress.target, self.progress.loaded):
                # asleep, most likely; the news goes on to the backend whether the state moved or not
                if refusal := self.models[model].swap_state(MAY_EXIT, ModelState.DOWN, "its vLLM exited"):
                    self.log(f"swap: {refusal}; it is left so")
                self.log(f"swap: vLLM for {model} (asleep) exited with code {event.get('code')}; "
                         "a swap to it starts it again")
            await self.events.put(event)
        await self.events.put({"event": CLOSED})

    def command(self, op: str, model: str, why: str | None = None) -> None:
        self.writer.write(message_line({"op": op, "model": model, **({"why": why} if why else {})}))

    async def run_until_healthy(self, op: str, model: str,
                                on_stopped: Callable[[dict], None] | None = None) -> str | None:
        """Send `op` for `model` (switch, start), then follow the launcher's news until that vLLM answers its
        health check (None), exits, or does not answer within VL_SWAP_LOAD of its start (the cause).
        on_stopped: called with the launcher's "stopped" event, when one comes (a switch stops the old vLLM first)."""
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
            if kind == CLOSED:
                return "the launcher's control channel closed"
            if kind == EVENT_STOPPED and on_stopped is not None:
                on_stopped(event)
            elif kind == EVENT_STARTED and event.get("model") == model:
                # starting already with sleep mode (start_or_stop)
                if refusal := self.models[model].swap_state(STARTED, ModelState.STARTING,
                                                            "the launcher started its vLLM"):
                    self.log(f"swap: {refusal}; its health is awaited all the same")
                self.started_at = time.monotonic()
                deadline = self.started_at + self.config.load_s
            elif kind == EVENT_EXITED and event.get("model") == model:
                return f"vLLM exited with code {event.get('code')} while loading it"
            elif kind == HEALTHY:
                return None

    async def wait_stopped(self, model: str) -> None:
        """Until the launcher says `model`'s vLLM is stopped (VL_SWAP_STOP and the GPU's release, at most)."""
        try:
            while True:
                event = await asyncio.wait_for(self.events.get(), self.config.load_s)
                if event.get("event") in (EVENT_STOPPED, CLOSED) and event.get("model", model) == model:
                    return
        except asyncio.TimeoutError:
            self.log(f"swap: the launcher did not report {model}'s vLLM stopped")

    async def next_event(self, poll_health: bool) -> dict:
        """The launcher's next event; once vLLM started, {"event": "healthy"} when its /health answers."""
        if not poll_health:
            return await self.events.get()
        while True:
            if not self.events.empty():
                return self.events.get_nowait()
            if await self.healthy():
                return {"event": HEALTHY}
            try:
                return await asyncio.wait_for(self.events.get(), HEALTH_POLL_S)
            except asyncio.TimeoutError:
                continue

    async def healthy(self) -> bool:
        return await self.health.check(5.0)
