"""What one model's vLLM is doing, in names both sides of the swap channel use (contract.py re-exports them).

The launcher (launcher/supervise.py) keeps one record per model process and the bridge (serving/swap.py) one view
per model; each moves its state only along TRANSITIONS, the way llama-swap's proxy/process.go does: a move the
table does not allow is refused and logged, never applied. The status page shows the bridge's states
(docs/status.md's `swap.models`). Stdlib only, like the launcher.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Iterable, Mapping


class ModelState(str, Enum):
    AVAILABLE = "available"  # no vLLM, none expected: restart-based swaps' other models, or not started yet
    STARTING = "starting"  # its vLLM was started and has not answered its health check yet
    AWAKE = "awake"  # its vLLM serves (the launcher: its exit is the container's)
    ASLEEP = "asleep"  # sleep mode: its vLLM runs, asleep (weights in host RAM, or discarded at level 2)
    STOPPING = "stopping"  # the launcher is stopping its process group: the exit that follows is expected
    DOWN = "down"  # its vLLM is gone (exited, or stopped after it did not sleep): started again when wanted
    FAILED = "failed"  # it could not start (exited while loading, or no health within VL_SWAP_LOAD)

    def __str__(self) -> str:
        return self.value


S = ModelState
TRANSITIONS: Mapping[ModelState, frozenset[ModelState]] = {
    # AVAILABLE/DOWN -> FAILED: the launcher could not even start its vLLM (exec refused: no `started` news)
    S.AVAILABLE: frozenset({S.STARTING, S.FAILED}),
    # STARTING -> ASLEEP: a vLLM answers /sleep as soon as it listens, before a health poll saw it answer
    S.STARTING: frozenset({S.AWAKE, S.ASLEEP, S.FAILED, S.STOPPING, S.DOWN}),
    S.AWAKE: frozenset({S.ASLEEP, S.STOPPING, S.DOWN, S.AVAILABLE}),
    S.ASLEEP: frozenset({S.AWAKE, S.STARTING, S.STOPPING, S.DOWN}),  # STARTING: a failed wake starts it again
    S.STOPPING: frozenset({S.AVAILABLE, S.DOWN}),
    S.DOWN: frozenset({S.STARTING, S.FAILED}),
    S.FAILED: frozenset({S.STARTING, S.STOPPING, S.DOWN}),
}


def allowed(current: ModelState, new: ModelState) -> bool:
    """Whether `current` may become `new`; staying in a state is always allowed (and changes nothing)."""
    return new is current or new in TRANSITIONS[current]


def transition(name: str, current: ModelState, new: ModelState, log: Callable[[str], None], why: str = "",
               who: str = "swap") -> ModelState:
    """The state `name` is in after asking to move from `current` to `new`: `new` when the table allows it, else
    `current`, the refusal logged."""
    if allowed(current, new):
        return new
    log(f"{who}: refused to move {name} from {current} to {new}{f' ({why})' if why else ''}: not a transition "
        "of modelstate.TRANSITIONS (a bug: please report it with this log)")
    return current


class ModelStates:
    """Each model's state (the bridge's view), moved only along TRANSITIONS."""

    def __init__(self, names: Iterable[str], initial: ModelState, log: Callable[[str], None]) -> None:
        self.states: dict[str, ModelState] = {name: initial for name in names}
        self.log = log

    def __getitem__(self, name: str) -> ModelState:
        return self.states[name]

    def __contains__(self, name: object) -> bool:
        return name in self.states

    def items(self):
        return self.states.items()

    def move(self, name: str, new: ModelState, why: str = "") -> bool:
        """`name` becomes `new` when the table allows it (True); else it is logged and nothing changes (False)."""
        self.states[name] = transition(name, self.states[name], new, self.log, why)
        return self.states[name] is new
