"""What the bridge asks of a swap set's processes (entrypoint/swapchannel.py's commands), done by the launcher: a
restart-based swap (Switch), a sleep-mode model's start or stop beside the others (Start, Stop), the model that serves
from now on (Serving), the end of the container when the previous model did not come back (GiveUp).

The supervisor (launcher/supervise.py) owns the processes and their records; these orders move them through it, and
every record's state moves along modelstate.TRANSITIONS only. Stdlib only, like the launcher.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol

from ...contract import EXIT_WATCHDOG
from ...modelstate import LIVE, MAY_SLEEP, ModelState
from ...swapchannel import Command, Event, GiveUp, Serving, Start, Stop, Stopped, Switch
from .control import wait_for_memory
from .plan import VRAM_FREE_MIB, VRAM_WAIT_S
from .sleepmode import SLEEP_KEEP_GIB

if TYPE_CHECKING:
    from ..runstate import Observer
    from .plan import SwapSet

GIVE_UP_STOP_S = 5.0  # SIGKILL this long after SIGTERM, for the models' vLLMs once the bridge gave up


class ModelRecord(Protocol):
    """One model's vLLM as the supervisor keeps it (supervise.ModelProcess)."""
    name: str
    env: Mapping[str, str]
    state: ModelState

    @property
    def running(self) -> bool: ...

    @property
    def exited(self) -> bool: ...

    @property
    def process(self): ...

    def swap_state(self, expected: Iterable[ModelState] | None, new: ModelState, why: str = ""): ...


class Supervising(Protocol):
    """What the orders need of the supervisor (supervise.Supervisor)."""
    records: Mapping[str, ModelRecord]
    current: str
    stopping: list[int]
    stopped_state: ModelState
    observer: Observer | None
    log: Callable[[str], None]

    def stop(self, record, grace_s: float) -> None: ...

    def stop_others(self, grace_s: float) -> None: ...

    def start_model(self, record) -> None: ...

    def expect(self, record, expected: Iterable[ModelState], new: ModelState, why: str) -> None: ...

    def tell(self, event: Event) -> None: ...

    def running_count(self) -> int: ...

    def reap(self) -> None: ...

    def after_exits(self) -> int | None: ...

    def vllm_exited(self, record) -> int: ...

    def end_bridge(self) -> None: ...


class SwapOrders:
    """The bridge's commands, each done to the supervisor's processes; a command returns the container's exit code
    when it ends the container, else None."""

    def __init__(self, supervisor: Supervising, swap: SwapSet) -> None:
        self.supervisor, self.swap = supervisor, swap

    def obey(self, command: Command) -> int | None:
        supervisor, model = self.supervisor, command.model
        if isinstance(command, Serving):
            if self.swap.sleep_level and model in supervisor.records:
                self.make_current(model)
            if model != supervisor.current:
                return None
            supervisor.expect(supervisor.records[model], LIVE, ModelState.AWAKE, "it answered its health check")
            if supervisor.observer:
                supervisor.observer.swapping(None)
            supervisor.log(f"swap: {model} answers; its exit is the container's from now on")
            return supervisor.after_exits()
        if isinstance(command, GiveUp) and model == supervisor.current:
            return self.give_up(command.why or f"{model} did not come back after a failed swap")
        if model not in supervisor.records or supervisor.stopping:
            return None
        if isinstance(command, Switch):
            return self.switch(model)
        if isinstance(command, (Start, Stop)) and self.swap.sleep_level:
            return self.start_beside(model, start=isinstance(command, Start))
        return None

    def make_current(self, model: str) -> None:
        """Sleep mode: `model`, awake now, serves; every other vLLM still running sleeps (the bridge keeps one
        awake at most)."""
        for record in self.supervisor.records.values():
            if record.name != model and record.running:
                # refused when it is not up: it stays as it is
                record.swap_state(MAY_SLEEP, ModelState.ASLEEP, f"{model} serves")
        self.supervisor.current = model

    def start_beside(self, model: str, start: bool) -> int | None:
        """Sleep mode: stop `model`'s vLLM if it runs, then (start) start it again, the others left as they are."""
        supervisor = self.supervisor
        began, record = time.monotonic(), supervisor.records[model]
        if supervisor.observer and start:
            supervisor.observer.swapping(model)
        if record.process is not None:
            supervisor.log(f"swap: stopping vLLM ({model})")
            supervisor.stop(record, self.swap.stop_s)
            released, used = wait_for_memory(self.swap.nvidia_smi, record.env,
                                             VRAM_FREE_MIB + int(supervisor.running_count() * SLEEP_KEEP_GIB * 1024),
                                             VRAM_WAIT_S, lambda: bool(supervisor.stopping))
            supervisor.tell(Stopped(record.name, record.state, round(time.monotonic() - began, 3),
                                    None if used is None else tuple(used), released))
        elif not start:
            supervisor.tell(Stopped(record.name, record.state, 0.0))
        if start and not supervisor.stopping:
            supervisor.start_model(record)  # the current one's exit while it loads is the bridge's to decide
        return None

    def give_up(self, why: str) -> int:
        """The previous model did not come back after a failed swap: the container ends, with that vLLM's
        exit code when it exited, else EXIT_WATCHDOG once it is stopped (it never answered /health)."""
        supervisor = self.supervisor
        if supervisor.observer:
            supervisor.observer.swapping(None)
        supervisor.reap()
        current = supervisor.records[supervisor.current]
        if current.exited and current.state is not supervisor.stopped_state:
            return supervisor.vllm_exited(current)  # it exited: the container's exit, with its code
        message = (f"swap: {why} Stopping vLLM ({supervisor.current}); the container exits {EXIT_WATCHDOG} so that "
                   "RunPod restarts it (a larger VL_SWAP_LOAD gives a slow model more time)")
        supervisor.log(message)
        supervisor.stop(current, GIVE_UP_STOP_S)
        supervisor.stop_others(GIVE_UP_STOP_S)
        if supervisor.observer:
            supervisor.observer.exited(EXIT_WATCHDOG, message)
        supervisor.end_bridge()
        return EXIT_WATCHDOG

    def switch(self, model: str) -> int | None:
        """Restart-based swap: stop the current vLLM, wait for the GPU's memory, start `model`'s plan."""
        supervisor = self.supervisor
        previous, began = supervisor.records[supervisor.current], time.monotonic()
        if supervisor.observer:
            supervisor.observer.swapping(model)
        supervisor.log(f"swap: {previous.name} -> {model}: stopping vLLM ({previous.name})")
        supervisor.stop(previous, self.swap.stop_s)
        if supervisor.stopping:
            return None  # docker stop during the swap: the loop ends with the bridge's and vLLM's exits
        released, used = wait_for_memory(self.swap.nvidia_smi, previous.env, VRAM_FREE_MIB, VRAM_WAIT_S,
                                         lambda: bool(supervisor.stopping))
        stopped_s = time.monotonic() - began
        shown = "?" if used is None else "/".join(map(str, used))
        supervisor.log(f"swap: vLLM ({previous.name}) stopped in {stopped_s:.1f} s; GPU memory used {shown} MiB"
                       + ("" if released else f": still at or above {VRAM_FREE_MIB} MiB after {VRAM_WAIT_S:g} s, "
                                              "starting anyway (vLLM may size itself smaller)"))
        supervisor.tell(Stopped(previous.name, previous.state, round(stopped_s, 3),
                                None if used is None else tuple(used), released))
        if supervisor.stopping:
            return None
        supervisor.current = model
        supervisor.start_model(supervisor.records[model])
        return None
