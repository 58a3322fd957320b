"""One model of the swap set as the bridge keeps it, after llama-swap's internal/process `Process`: its facts (the
launcher's contract.SwapTarget: its names, its upstream), its state (moved only along modelstate.TRANSITIONS, by
`swap_state(expected, new)`, which returns the Refusal to its caller), the requests waiting for it, and its last
failed swap. The scheduler (scheduler.py) keeps one per model and asks them; the backends (restart.py, sleep.py) and
the channel's news (link.py) move their states.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Callable, NamedTuple

from ...contract import SwapTarget
from ...modelnames import NameMap
from ...modelstate import ModelState, StateMachine

# A model whose swap failed is refused at once for this long: SDKs and Claude Code retry errors, and each
# retry would otherwise stop the working model for another failing start of minutes.
FAILED_SWAP_HOLD_S = 300.0


class SwapFailed(Exception):
    """The request cannot be served (a 503, typed per API by serving/api.py): the message says which model and
    why."""


class Waiter(NamedTuple):
    future: asyncio.Future  # set to the request's ticket, or to SwapFailed
    arrival: float  # time.monotonic() when it came
    requested: str | None  # the name the request sent


class Waiting:
    """Requests waiting, oldest first: for one model (SwapModel.waiting), or for whichever model is loaded (the
    Swapper's `any_model`)."""

    def __init__(self) -> None:
        self.waiters: deque[Waiter] = deque()

    def __bool__(self) -> bool:
        return bool(self.waiters)

    def __len__(self) -> int:
        return len(self.waiters)

    def add(self, requested: str | None) -> asyncio.Future:
        """A new waiter's future, resolved by serve or fail."""
        future = asyncio.get_running_loop().create_future()
        self.waiters.append(Waiter(future, time.monotonic(), requested))
        return future

    def leave(self, future: asyncio.Future) -> None:
        """The waiter of `future` is gone (its client left)."""
        self.waiters = deque(waiter for waiter in self.waiters if waiter.future is not future)

    def oldest_arrival(self) -> float:
        return self.waiters[0].arrival

    def serve(self, ticket: Callable[[str | None], object]) -> None:
        """Every waiter gets `ticket(the name it sent)`; the queue is empty after."""
        waiters, self.waiters = self.waiters, deque()
        for waiter in waiters:
            if not waiter.future.done():
                waiter.future.set_result(ticket(waiter.requested))

    def fail(self, message: str) -> None:
        """Every waiter gets SwapFailed(message); the queue is empty after."""
        waiters, self.waiters = self.waiters, deque()
        for waiter in waiters:
            if not waiter.future.done():
                waiter.future.set_exception(SwapFailed(message))


class SwapModel(StateMachine):
    """One model of the set: what the launcher planned for it, its state, who waits for it, its last failed swap."""

    def __init__(self, name: str, state: ModelState = ModelState.AVAILABLE, target: SwapTarget | None = None) -> None:
        self.name, self.state = name, state
        self.target = target or SwapTarget(name, name, "", None)
        self.waiting = Waiting()
        self.failure: tuple[float, str] | None = None  # its last failed swap: (time.monotonic() then, the message)

    @classmethod
    def of(cls, target: SwapTarget) -> SwapModel:
        return cls(target.name, target=target)

    @property
    def upstream(self) -> str | None:
        """Its own vLLM's address (sleep mode: each model runs one), or None: the one vLLM's (--upstream)."""
        return self.target.upstream

    @property
    def served(self) -> tuple[str, ...]:
        """Every name its vLLM answers to, its own first (a client's other names for it are renamed to its own)."""
        return self.target.served or tuple(NameMap.of([self.name]).by_name)

    def swap_failed(self, message: str) -> None:
        """A swap to it failed: its waiters get `message`, and so does every request for it for FAILED_SWAP_HOLD_S."""
        self.failure = (time.monotonic(), message)
        self.waiting.fail(message)

    def refused_for(self) -> str | None:
        """What a request for it is answered at once while its failed swap is held, else None (a hold that ran out
        is forgotten here)."""
        if self.failure is None:
            return None
        when, message = self.failure
        if time.monotonic() - when < FAILED_SWAP_HOLD_S:
            return f"{message} (not tried again for {FAILED_SWAP_HOLD_S - time.monotonic() + when:.0f} s)"
        self.failure = None
        return None
