"""What both swap backends share: the bridge's end of the launcher's control channel (entrypoint/swapchannel.py's
messages), vLLM's /health while a model loads, and where the pod's swapping stands (SwapProgress, changed only by its
own methods, its phase moved only along modelstate.SWAP_PHASES).

The launcher's news moves the models' states (each a model.SwapModel): `started` makes a model starting;
`exited` of a model that is neither the loaded one nor the one coming (a sleeping vLLM died) makes it down. The rest
is the backend's to decide.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Union

import aiohttp

from ...contract import SwapConfig
from ...modelstate import MAY_EXIT, START_ASKED, ModelState, Refusal, SwapPhase, swap_phase
from ...swapchannel import Command, Exited, Started, Stopped, line_of, read_event
from ..health import Health
from .model import SwapModel

LOADING_HEALTH_POLL_S = 0.1  # a local GET; the swap's overhead beyond vLLM's own start is at most this


@dataclass(frozen=True)
class ChannelClosed:
    """The launcher closed the control channel (the bridge's own news, not a message of the channel)."""


@dataclass(frozen=True)
class Healthy:
    """The loading vLLM answered /health for the first time (the bridge's own news)."""


News = Union[Started, Exited, Stopped, ChannelClosed, Healthy]


class SwapProgress:
    """Where the pod's models stand, for the scheduler (scheduler.py) and its backend alike; read-only outside its
    own methods."""

    def __init__(self, loaded: str, phase: SwapPhase = SwapPhase.SERVING) -> None:
        self._loaded = loaded
        self._target: str | None = None
        self._source: str | None = None
        self._phase = phase
        self._broken: str | None = None

    @property
    def loaded(self) -> str:
        """The model vLLM runs, or is starting."""
        return self._loaded

    @property
    def target(self) -> str | None:
        """The model a swap in progress (or the warm-up) is bringing up."""
        return self._target

    @property
    def source(self) -> str | None:
        """The model a swap in progress replaces (loaded may turn to the target before it answers)."""
        return self._source

    @property
    def phase(self) -> SwapPhase:
        """Moved only along modelstate.SWAP_PHASES, by enter() and break_down()."""
        return self._phase

    @property
    def broken(self) -> str | None:
        """Why no model can be served (set only by enter(BROKEN) and break_down())."""
        return self._broken

    def swap_begins(self, target: str) -> None:
        """A swap from the loaded model to `target` is under way."""
        self._target, self._source = target, self._loaded

    def swap_ends(self) -> None:
        """The swap is over, however it went."""
        self._target = self._source = None

    def warming_up(self, model: str | None) -> None:
        """Sleep mode's warm-up starts `model` once (None: it is over)."""
        self._target = model

    def now_loaded(self, model: str) -> None:
        """`model` is what vLLM runs, or is loading, from now on."""
        self._loaded = model

    @property
    def warming(self) -> bool:
        """Sleep mode: the other models start once before any swap."""
        return self.phase is SwapPhase.WARMING

    def enter(self, expected: tuple[SwapPhase, ...], new: SwapPhase, why: str = "") -> Refusal | None:
        """The pod's phase becomes `new` when it is one of `expected` and SWAP_PHASES has the move (None); else the
        Refusal, nothing changed, for the caller to handle. `why` of BROKEN is what every request is answered."""
        refusal = swap_phase(self._phase, expected, new, why)
        if refusal is None:
            self._phase = new
            if new is SwapPhase.BROKEN:
                self._broken = why
        return refusal

    def break_down(self, expected: tuple[SwapPhase, ...], why: str) -> Refusal | None:
        """No model can be served, for good: the phase becomes BROKEN as enter() would, and `why` is what every
        request is answered even when the phase was not one of `expected` (a bug: the Refusal is returned to be
        logged, the phase left as it was)."""
        refusal = self.enter(expected, SwapPhase.BROKEN, why)
        self._broken = why
        return refusal


class LauncherLink:
    """Commands to the launcher (swapchannel's), its events in order, and the health checks of a loading vLLM."""

    def __init__(self, config: SwapConfig, control_fd: int, health: Health, models: Mapping[str, SwapModel],
                 progress: SwapProgress, log: Callable[[str], None]) -> None:
        self.config, self.control_fd, self.health, self.log = config, control_fd, health, log
        self.models, self.progress = models, progress
        self.events: asyncio.Queue[News] = asyncio.Queue()
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
        return self.models[model].upstream or self.health.base

    async def read_events(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            event = read_event(line)
            if event is None:
                continue
            model = event.model
            if isinstance(event, Exited) and model in self.models \
                    and model not in (self.progress.target, self.progress.loaded):
                # asleep, most likely; the news goes on to the backend whether the state moved or not
                if refusal := self.models[model].swap_state(MAY_EXIT, ModelState.DOWN, "its vLLM exited"):
                    self.log(f"swap: {refusal}; it is left so")
                self.log(f"swap: vLLM for {model} (asleep) exited with code {event.code}; "
                         "a swap to it starts it again")
            await self.events.put(event)
        await self.events.put(ChannelClosed())

    def command(self, command: Command) -> None:
        self.writer.write(line_of(command))

    async def run_until_healthy(self, command: Command,
                                on_stopped: Callable[[Stopped], None] | None = None) -> str | None:
        """Send `command` for its model (Switch, Start), then follow the launcher's news until that vLLM answers its
        health check (None), exits, or does not answer within VL_SWAP_LOAD of its start (the cause).
        on_stopped: called with the launcher's "stopped" event, when one comes (a switch stops the old vLLM first)."""
        while not self.events.empty():  # stale news of an earlier swap
            self.events.get_nowait()
        self.command(command)
        model = command.model
        self.started_at, deadline = None, None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                event = await asyncio.wait_for(self.next_event(self.started_at is not None), timeout)
            except asyncio.TimeoutError:
                return f"vLLM did not answer its health check within VL_SWAP_LOAD={self.config.load_s:g} s"
            if isinstance(event, ChannelClosed):
                return "the launcher's control channel closed"
            if isinstance(event, Stopped) and on_stopped is not None:
                on_stopped(event)
            elif isinstance(event, Started) and event.model == model:
                # starting already with sleep mode (start_or_stop)
                if refusal := self.models[model].swap_state(START_ASKED, ModelState.STARTING,
                                                            "the launcher started its vLLM"):
                    self.log(f"swap: {refusal}; its health is awaited all the same")
                self.started_at = time.monotonic()
                deadline = self.started_at + self.config.load_s
            elif isinstance(event, Exited) and event.model == model:
                return f"vLLM exited with code {event.code} while loading it"
            elif isinstance(event, Healthy):
                return None

    async def wait_stopped(self, model: str) -> None:
        """Until the launcher says `model`'s vLLM is stopped (VL_SWAP_STOP and the GPU's release, at most)."""
        try:
            while True:
                event = await asyncio.wait_for(self.events.get(), self.config.load_s)
                if isinstance(event, ChannelClosed) or (isinstance(event, Stopped) and event.model == model):
                    return
        except asyncio.TimeoutError:
            self.log(f"swap: the launcher did not report {model}'s vLLM stopped")

    async def next_event(self, poll_health: bool) -> News:
        """The launcher's next event; once vLLM started, Healthy() when its /health answers."""
        if not poll_health:
            return await self.events.get()
        while True:
            if not self.events.empty():
                return self.events.get_nowait()
            if await self.healthy():
                return Healthy()
            try:
                return await asyncio.wait_for(self.events.get(), LOADING_HEALTH_POLL_S)
            except asyncio.TimeoutError:
                continue

    async def healthy(self) -> bool:
        return await self.health.check(5.0)
