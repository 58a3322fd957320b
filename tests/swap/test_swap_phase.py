"""Moves that say which state they expect (modelstate.swap_state, as llama-swap's swapState) and the pod's swap phase
(SwapPhase, its own table SWAP_PHASES): a refused move changes nothing and is returned to the caller, not logged."""

from __future__ import annotations

import itertools

import pytest

from entrypoint.modelstate import SWAP_PHASES, TRANSITIONS, ModelState, Refusal, SwapPhase, swap_phase
from entrypoint.serving.swap.link import SwapProgress
from entrypoint.serving.swap.model import SwapModel

S, P = ModelState, SwapPhase


def test_a_move_from_an_unexpected_state_is_returned_refused_and_not_logged():
    lines: list[str] = []
    model = SwapModel("qwen", S.ASLEEP)
    refusal = model.swap_state((S.AWAKE,), S.AVAILABLE, "a swap stopped its vLLM")
    assert isinstance(refusal, Refusal) and model.state is S.ASLEEP and lines == []
    assert str(refusal) == "refused to move qwen from asleep to available (a swap stopped its vLLM): it was expected awake"
    assert model.swap_state((S.ASLEEP, S.AWAKE), S.AWAKE) is None and model.state is S.AWAKE
    assert model.swap_state(None, S.AVAILABLE) is None and model.state is S.AVAILABLE


@pytest.mark.parametrize("current, new", [(a, b) for a, b in itertools.product(S, S) if a is not b
                                          and b not in TRANSITIONS[a]][:6])
def test_a_move_the_table_lacks_is_refused_even_from_the_expected_state(current, new):
    model = SwapModel("qwen", current)
    refusal = model.swap_state((current,), new)
    assert refusal is not None and model.state is current
    assert str(refusal).endswith("not a transition of modelstate.TRANSITIONS (a bug: please report it with this log)")


def test_the_pods_phase_has_its_own_table():
    assert set(SWAP_PHASES) == set(P) and SWAP_PHASES[P.BROKEN] == frozenset()
    paths = [[P.WARMING, P.SERVING, P.SWAPPING, P.SERVING, P.SWAPPING, P.RETURNING, P.SERVING],
             [P.SERVING, P.SWAPPING, P.RETURNING, P.BROKEN], [P.WARMING, P.BROKEN]]
    for path in paths:
        assert all(swap_phase(a, (a,), b) is None for a, b in zip(path, path[1:])), path
    for new in P:
        if new is not P.BROKEN:
            assert swap_phase(P.BROKEN, None, new) is not None, "nothing clears a broken pod"
    assert swap_phase(P.SERVING, None, P.RETURNING) is not None  # a return follows a swap, never a serving pod


def test_the_progress_moves_its_phase_only_along_the_table():
    assert SwapProgress("ornith").phase is P.SERVING and SwapProgress("ornith").broken is None
    progress = SwapProgress("ornith", phase=P.WARMING)
    assert progress.warming
    refusal = progress.enter((P.SERVING,), P.SWAPPING, "ornith -> qwen")
    assert str(refusal) == "refused to move the pod from warming to swapping (ornith -> qwen): it was expected serving"
    assert progress.phase is P.WARMING
    assert progress.enter((P.WARMING,), P.BROKEN, "no model is served") is None
    assert progress.broken == "no model is served" and not progress.warming
    refused = progress.enter((P.WARMING,), P.SERVING)
    assert refused is not None and progress.phase is P.BROKEN and "it was expected warming" in str(refused)


def test_the_launchers_record_says_which_state_it_expects_too():
    from entrypoint.launcher.supervise import ModelProcess

    record = ModelProcess("qwen", ("vllm",), {}, state=S.ASLEEP)
    refusal = record.swap_state((S.STARTING,), S.FAILED, "its vLLM exited while loading")
    assert refusal is not None and record.state is S.ASLEEP and "it was expected starting" in str(refusal)
    assert record.swap_state((S.ASLEEP, S.AWAKE), S.STOPPING) is None and record.state is S.STOPPING
