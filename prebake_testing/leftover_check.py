"""A pytest plugin (tests/conftest.py loads it): no test or fixture leaves a process running.

Each process a test starts carries the run's mark and the name of what started it (prebake_testing.leftovers):
the test's node id while the test runs (its function-scoped fixtures included), or the fixture's own name while a
module-, class- or session-scoped fixture sets up. When a test's teardown is over, anything it started that still
runs is ended and the test gets an error naming it; so is a wider fixture's when that fixture is finalized (a
fixture that failed half-way included). At the session's end, anything still running that this session's tests
or fixtures started is named and ended, and the session fails.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Iterator

import pytest

from .leftovers import RUN_MARK, STARTED_BY, Leftover, end, find

# A process signalled in the teardown may take a moment to exit: only leftovers wait for it, this long at most.
GRACE_VARIABLE = "PREBAKE_LEFTOVER_GRACE_S"


def _grace_s() -> float:
    text = os.environ.get(GRACE_VARIABLE) or "5"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise pytest.UsageError(f"{GRACE_VARIABLE}={text!r} is not a number of seconds >= 0 (the time a process "
                                "signalled in a test's teardown may take to exit); unset it for 5")
    return value


GRACE_S = _grace_s()


def _this_run() -> str:
    """The run's mark: .ci/run's, or a new one. A pytest run inside a test (a test of the suite's own machinery)
    gets a run of its own under its parent's, so that neither ends the other's processes; .ci/run's final look,
    by its own run's mark, still sees both."""
    outer = os.environ.get(RUN_MARK)
    if outer and os.environ.get(STARTED_BY):
        return f"{outer}/{uuid.uuid4().hex[:12]}"
    return outer or f"pytest-{uuid.uuid4().hex[:12]}"


RUN = os.environ[RUN_MARK] = _this_run()
_fixture_labels: dict[int, str] = {}
_labels_used: set[str] = set()  # by this process: the only ones its session's end may look for
_setups = itertools.count(1)


class LeftoverProcesses(Exception):
    pass


def _still_running(started_by: str) -> list[Leftover]:
    deadline = time.monotonic() + GRACE_S
    while (left := find(RUN, started_by)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _check(started_by: str, what: str) -> None:
    left = _still_running(started_by)
    if left:
        end(left, RUN)
        raise LeftoverProcesses(f"{what} left {len(left)} process(es) running (ended now): "
                                + "; ".join(map(str, left)))


def _set_started_by(label: str) -> str | None:
    _labels_used.add(label)
    before = os.environ.get(STARTED_BY)
    os.environ[STARTED_BY] = label
    return before


def _restore(before: str | None) -> None:
    if before is None:
        os.environ.pop(STARTED_BY, None)
    else:
        os.environ[STARTED_BY] = before


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    before = _set_started_by(item.nodeid)
    try:
        return (yield)
    finally:
        _restore(before)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    result = yield
    _check(item.nodeid, f"the test {item.nodeid}")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Iterator[object]:
    if fixturedef.scope == "function":
        return (yield)
    # unique to this set-up: the same fixture may be set up again, here or at once on another xdist worker
    label = (f"the {fixturedef.scope}-scoped fixture {fixturedef.argname!r} (set up for {request.node.nodeid}, "
             f"set-up {next(_setups)} of pytest process {os.getpid()})")
    _fixture_labels[id(fixturedef)] = label
    before = _set_started_by(label)
    try:
        return (yield)
    finally:
        _restore(before)


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> None:
    label = _fixture_labels.pop(id(fixturedef), None)
    if label is not None:
        _check(label, label)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """What a check above did not reach (an interrupted run): anything still running that a test or fixture of
    this process started. Each xdist worker looks at its own; another process's are never touched."""
    left = [leftover for leftover in find(RUN) if leftover.started_by in _labels_used]
    if not left:
        return
    end(left, RUN)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(left)} process(es) the tests started were still running at the end (ended now):",
             *(f"  {leftover}" for leftover in left)]
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
