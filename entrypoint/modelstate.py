"""What one model's vLLM is doing, in names both sides of the swap channel use (its events carry them:
swapchannel.py), with every named set of states a move expects, each defined once here.

The launcher (launcher/supervise.py ModelProcess) keeps one record per model process and the bridge
(serving/swap/model.py SwapModel) one object per model; both are a StateMachine, which moves its state only along
TRANSITIONS, the way llama-swap's process does: a move the table does not allow is refused, never applied.
`swap_state(expected, new)` says which state the caller expects and returns the Refusal for the caller to handle;
`move` (a move that expects no state in particular) logs it. The pod's swap phase (SwapPhase) has a table of its
own, SWAP_PHASES. The status page shows the bridge's states (docs/status.md's `swap.models`). Stdlib only, like the
launcher.
"""

from __future__ import annotations

from dataclasses import dataclass
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


# The named sets of states, each once, for both sides (a move's `expected`, or what a record's state means):
LIVE = frozenset({S.STARTING, S.AWAKE, S.ASLEEP})  # its vLLM runs, as far as the launcher has heard
STOPPABLE = LIVE | {S.FAILED}  # a stop moves it to STOPPING (failed: its process may still be there)
MAY_EXIT = STOPPABLE | {S.STOPPING}  # the launcher's news of its vLLM's exit may come
MAY_SLEEP = frozenset({S.AWAKE, S.STARTING})  # it answers, or was started and has not said so yet
# The two sets a start may begin from: without a vLLM (never started, down, or its start failed), or also asleep
# (the launcher's view: a failed wake starts a sleeping vLLM again, its process group stopped first).
STARTABLE_WITHOUT_VLLM = frozenset({S.AVAILABLE, S.DOWN, S.FAILED})
STARTABLE_EVEN_ASLEEP = STARTABLE_WITHOUT_VLLM | {S.ASLEEP}
START_ASKED = STARTABLE_WITHOUT_VLLM | {S.STARTING}  # a start's outcome: `started` came (starting), or did not


def allowed(current: ModelState, new: ModelState) -> bool:
    """Whether `current` may become `new`; staying in a state is always allowed (and changes nothing)."""
    return new is current or new in TRANSITIONS[current]


@dataclass(frozen=True)
class Refusal:
    """A move that was not made: the table does not have it, or the state was not the one the caller expected.
    Nothing changed; the caller decides what follows (llama-swap's swapState returns its error the same way)."""
    name: str  # the model, or "the pod" for its swap phase
    current: Enum
    new: Enum
    why: str = ""
    expected: frozenset = frozenset()  # the states the caller expected (empty: any)
    table: str = "TRANSITIONS"

    def __str__(self) -> str:
        move = f"refused to move {self.name} from {self.current} to {self.new}{f' ({self.why})' if self.why else ''}"
        if self.expected and self.current not in self.expected:
            return f"{move}: it was expected {' or '.join(sorted(map(str, self.expected)))}"
        return f"{move}: not a transition of modelstate.{self.table} (a bug: please report it with this log)"


def swap_state(name: str, current: ModelState, expected: Iterable[ModelState] | None, new: ModelState,
               why: str = "") -> Refusal | None:
    """None when `name` may move from `current` to `new` (current one of `expected`, when given, and the move one of
    TRANSITIONS), else the Refusal."""
    wanted = frozenset(expected or ())
    if (wanted and current not in wanted) or not allowed(current, new):
        return Refusal(name, current, new, why, wanted)
    return None


class StateMachine:
    """One model's state, moved only along TRANSITIONS: the launcher's record of its process (launcher/supervise.py
    ModelProcess) and the bridge's view of it (serving/swap/model.py SwapModel) are both one. The subclass holds
    `name` and `state`."""
    name: str
    state: ModelState
    who = "swap"  # what a logged refusal begins with

    def swap_state(self, expected: Iterable[ModelState] | None, new: ModelState, why: str = "") -> Refusal | None:
        """`new` when the state is one of `expected` (any, when None) and the table has the move: None; else the
        Refusal, for the caller to handle (nothing changed, nothing logged)."""
        refusal = swap_state(self.name, self.state, expected, new, why)
        if refusal is None:
            self.state = new
        return refusal

    def move(self, new: ModelState, log: Callable[[str], None], why: str = "") -> bool:
        """`new` when the table allows it, from any state (True); else the refusal is logged and nothing changes
        (False)."""
        refusal = self.swap_state(None, new, why)
        if refusal is not None:
            log(f"{self.who}: {refusal}")
        return refusal is None


class SwapPhase(str, Enum):
    """Where the pod's swapping stands (the bridge's scheduler, serving/swap/scheduler.py): one phase at a time."""
    WARMING = "warming"  # sleep mode: every model of the set starts once, then sleeps, before any swap
    SERVING = "serving"  # one model is loaded (or loading with the pod); no swap in progress
    SWAPPING = "swapping"  # a swap brings another model up
    RETURNING = "returning"  # that swap failed: the previous model is brought back
    BROKEN = "broken"  # no model can be served: the launcher ends the container

    def __str__(self) -> str:
        return self.value


P = SwapPhase
SWAP_PHASES: Mapping[SwapPhase, frozenset[SwapPhase]] = {
    P.WARMING: frozenset({P.SERVING, P.BROKEN}),
    P.SERVING: frozenset({P.SWAPPING}),
    P.SWAPPING: frozenset({P.SERVING, P.RETURNING}),
    P.RETURNING: frozenset({P.SERVING, P.BROKEN}),
    P.BROKEN: frozenset(),  # for good: nothing here clears it
}


def swap_phase(current: SwapPhase, expected: Iterable[SwapPhase] | None, new: SwapPhase,
               why: str = "") -> Refusal | None:
    """None when the pod may move from phase `current` to `new` (current one of `expected`, when given), else the
    Refusal."""
    wanted = frozenset(expected or ())
    if (wanted and current not in wanted) or (new is not current and new not in SWAP_PHASES[current]):
        return Refusal("the pod", current, new, why, wanted, "SWAP_PHASES")
    return None
