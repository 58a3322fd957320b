"""One model of the swap set as the bridge keeps it (entrypoint/serving/swap/model.py): its state moves only from the
state a caller expects, its failed swap is held for FAILED_SWAP_HOLD_S, and its waiters are served or failed at once."""

from __future__ import annotations

import asyncio

import pytest

from entrypoint.modelstate import START_ASKED, ModelState, Refusal
from entrypoint.serving.swap.model import FAILED_SWAP_HOLD_S, SwapFailed, SwapModel, Waiting

S = ModelState


def test_a_move_from_an_unexpected_state_is_refused_and_changes_nothing():
    model = SwapModel("qwen", S.AWAKE)
    model.failure = (1.0, "an earlier failure")
    refusal = model.swap_state(START_ASKED, S.FAILED, "vLLM exited with code 1 while loading it")
    assert isinstance(refusal, Refusal) and model.state is S.AWAKE
    assert model.failure == (1.0, "an earlier failure") and not model.waiting
    assert str(refusal) == ("refused to move qwen from awake to failed (vLLM exited with code 1 while loading it): "
                            "it was expected available or down or failed or starting")
    assert model.swap_state(START_ASKED, S.STARTING, "the launcher started its vLLM") is not None  # nor from awake
    assert model.state is S.AWAKE


def test_a_move_from_an_expected_state_is_made():
    model = SwapModel("qwen")
    assert model.state is S.AVAILABLE
    assert model.swap_state((S.AVAILABLE,), S.STARTING) is None and model.state is S.STARTING
    assert model.swap_state(START_ASKED, S.FAILED, "no health") is None and model.state is S.FAILED


def test_a_failed_swap_is_held_then_forgotten():
    model = SwapModel("qwen")
    assert model.refused_for() is None
    model.swap_failed("swap to model qwen failed: vLLM exited")
    refused = model.refused_for()
    assert refused.startswith("swap to model qwen failed: vLLM exited (not tried again for ")
    assert refused.endswith(f"{FAILED_SWAP_HOLD_S:.0f} s)") or refused.endswith(f"{FAILED_SWAP_HOLD_S - 1:.0f} s)")
    when, message = model.failure
    model.failure = (when - FAILED_SWAP_HOLD_S, message)  # as if the hold had run out
    assert model.refused_for() is None and model.failure is None


def test_waiters_are_served_in_order_failed_and_may_leave():
    async def scenario():
        waiting = Waiting()
        first, gone, second = waiting.add("qwen"), waiting.add("claude-haiku"), waiting.add(None)
        assert len(waiting) == 3 and waiting.oldest_arrival() <= waiting.waiters[-1].arrival
        waiting.leave(gone)
        cancelled = waiting.add("late")
        cancelled.cancel()  # a client that left without leaving the queue: skipped
        waiting.serve(lambda requested: f"ticket for {requested}")
        assert not waiting and first.result() == "ticket for qwen" and second.result() == "ticket for None"
        assert not gone.done()

        model = SwapModel("ornith")
        waiter = model.waiting.add("ornith")
        model.swap_failed("swap to model ornith failed: no health")
        with pytest.raises(SwapFailed, match="swap to model ornith failed: no health"):
            await waiter
        assert not model.waiting and model.refused_for() is not None

    asyncio.run(scenario())
