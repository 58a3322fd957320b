"""The swap channel's messages (entrypoint/swapchannel.py) and the named sets of states (entrypoint/modelstate.py):
each message crosses as one JSON line and comes back equal; a line that is no message is read as None, never as a
half-filled one; the sets each side's moves expect are the one module's."""

from __future__ import annotations

import pytest

from entrypoint.modelstate import (LIVE, MAY_EXIT, MAY_SLEEP, START_ASKED, STARTABLE_EVEN_ASLEEP,
                                   STARTABLE_WITHOUT_VLLM, STOPPABLE, ModelState)
from entrypoint.serving.swap.link import SwapProgress
from entrypoint.swapchannel import (GiveUp, Exited, Serving, Start, Started, Stop, Stopped, Switch, line_of,
                                    read_command, read_event)

S = ModelState
COMMANDS = [Switch("qwen"), Start("qwen"), Stop("qwen"), Serving("qwen"), GiveUp("qwen", "it did not come back")]
EVENTS = [Started("qwen", S.STARTING, 42), Exited("qwen", S.FAILED, 1), Stopped("qwen", S.DOWN, 0.0),
          Stopped("qwen", S.AVAILABLE, 3.25, (1024, 512), False)]


@pytest.mark.parametrize("message", COMMANDS + EVENTS, ids=lambda m: type(m).__name__)
def test_a_message_crosses_as_one_line_and_comes_back_equal(message):
    line = line_of(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    read = read_command(line) if message in COMMANDS else read_event(line)
    assert read == message and type(read) is type(message)


def test_the_wire_keeps_its_spelling():
    assert line_of(Switch("qwen")) == b'{"op": "switch", "model": "qwen"}\n'
    assert line_of(Exited("qwen", S.DOWN, 137)) == b'{"event": "exited", "model": "qwen", "state": "down", "code": 137}\n'


@pytest.mark.parametrize("line", [b"not json", b"[1]", b'{"op": "reboot", "model": "qwen"}', b'{"op": ["switch"]}',
                                  b'{"op": "switch"}', b'{"op": "switch", "model": 7}',
                                  b'{"event": "exited", "model": "qwen", "state": "sleepy", "code": 1}',
                                  b'{"event": "started", "model": "qwen", "state": "starting"}'])
def test_a_line_that_is_no_message_is_read_as_none(line):
    assert read_command(line) is None and read_event(line) is None


def test_the_named_sets_say_their_difference():
    assert STARTABLE_EVEN_ASLEEP - STARTABLE_WITHOUT_VLLM == {S.ASLEEP}
    assert START_ASKED == STARTABLE_WITHOUT_VLLM | {S.STARTING}
    assert MAY_SLEEP < LIVE < STOPPABLE < MAY_EXIT and S.STOPPING in MAY_EXIT


def test_the_progress_is_changed_only_by_its_own_methods():
    progress = SwapProgress("ornith")
    with pytest.raises(AttributeError):
        progress.loaded = "qwen"
    progress.swap_begins("qwen")
    assert (progress.target, progress.source, progress.loaded) == ("qwen", "ornith", "ornith")
    progress.now_loaded("qwen")
    progress.swap_ends()
    assert (progress.target, progress.source, progress.loaded) == (None, None, "qwen")
