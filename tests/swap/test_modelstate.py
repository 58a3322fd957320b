"""The model process state machine both sides of the swap channel share (entrypoint/modelstate.py, its states carried
by the channel's events, swapchannel.py): every transition of its table is taken, every other one is refused and logged, never applied."""

from __future__ import annotations

import itertools

import pytest

from entrypoint.launcher.supervise import ModelProcess
from entrypoint.modelstate import TRANSITIONS, ModelState, allowed
from entrypoint.swapchannel import Exited, line_of, read_event
from entrypoint.serving.swap.model import SwapModel

S = ModelState
VALID = [(a, b) for a, targets in TRANSITIONS.items() for b in sorted(targets)]
INVALID = [(a, b) for a, b in itertools.product(S, S) if a is not b and b not in TRANSITIONS[a]]


def test_every_state_has_a_row_and_the_names_are_the_status_pages():
    assert set(TRANSITIONS) == set(S)
    assert [state.value for state in S] == ["available", "starting", "awake", "asleep", "stopping", "down", "failed"]
    assert read_event(line_of(Exited("qwen", S.DOWN, 1))).state is S.DOWN  # one enum, both ends of the channel
    assert len(VALID) == 22 and len(INVALID) == 7 * 6 - 22


@pytest.mark.parametrize("current, new", VALID, ids=[f"{a}->{b}" for a, b in VALID])
def test_a_valid_transition_is_applied_silently(current, new):
    lines: list[str] = []
    model = SwapModel("qwen", current)
    assert model.move(new, lines.append) and model.state is new and lines == []
    record = ModelProcess("qwen", ("vllm",), {}, state=current)
    record.move(new, lines.append)
    assert record.state is new and lines == []


@pytest.mark.parametrize("current, new", INVALID, ids=[f"{a}->{b}" for a, b in INVALID])
def test_an_invalid_transition_is_refused_and_logged(current, new):
    lines: list[str] = []
    model, other = SwapModel("qwen", current), SwapModel("ornith", current)
    assert not model.move(new, lines.append, "a test asked") and model.state is current
    assert lines == [f"swap: refused to move qwen from {current} to {new} (a test asked): not a transition of "
                     "modelstate.TRANSITIONS (a bug: please report it with this log)"]
    assert other.state is current  # the others are left alone
    record = ModelProcess("qwen", ("vllm",), {}, state=current)
    record.move(new, lines.append)
    assert record.state is current and lines[-1].startswith(f"swap (launcher): refused to move qwen from {current}")


@pytest.mark.parametrize("state", list(S))
def test_staying_in_a_state_is_no_transition(state):
    lines: list[str] = []
    model = SwapModel("qwen", state)
    assert allowed(state, state) and model.move(state, lines.append) and lines == []


def test_the_paths_a_swap_takes_are_in_the_table():
    """Restart: the loaded model's vLLM is stopped, the other started; sleep: the loaded one sleeps, the other wakes,
    a failed wake starts it again, a model that will not sleep is stopped, a sleeping one may die."""
    paths = [[S.AVAILABLE, S.STARTING, S.AWAKE, S.AVAILABLE, S.STARTING, S.FAILED, S.STARTING],
             [S.AWAKE, S.STOPPING, S.AVAILABLE],  # the launcher's stop of a restart-based swap
             [S.AVAILABLE, S.STARTING, S.AWAKE, S.ASLEEP, S.AWAKE, S.ASLEEP, S.STARTING, S.AWAKE, S.DOWN, S.STARTING],
             [S.ASLEEP, S.DOWN, S.STARTING, S.FAILED, S.STOPPING, S.DOWN]]
    for path in paths:
        assert all(allowed(a, b) for a, b in zip(path, path[1:])), path
