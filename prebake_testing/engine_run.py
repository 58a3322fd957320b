"""A pytest plugin (tests/conftest.py loads it): what a test run made in the shared Docker Engine is removed once, when
the whole run is over (prebake_testing.engine.SessionTags says what counts as made).

Under pytest-xdist each worker is a session of its own and the Docker tier runs on both workers (the serial unit of
builds on one, the files that only read prebuilt images on either: prebake_testing/tiers.py). A worker that ended
first must not remove what the other is still using: the tiny image's tags, or a build's image in the moment between
its build and its tag. So the run's own process (the one xdist's workers report to, or the only one) takes the
engine's state at its start and, if any Docker test ran, removes what the tests made at its end. A pytest run inside
a test (the suite testing its own machinery) leaves the engine alone.
"""

from __future__ import annotations

import os

import docker
import pytest

from .buildpy import TEST_BASE
from .engine import SessionTags
from .leftovers import STARTED_BY

_state: dict[str, object] = {"tags": None, "docker_ran": False}


def _runs_the_run(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and not os.environ.get(STARTED_BY)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _runs_the_run(session.config):
        return
    try:
        client = docker.from_env(timeout=900)
        client.ping()
    except docker.errors.DockerException:
        return  # no engine: the Docker tier's `client` fixture fails its tests, naming what is missing
    _state["tags"] = SessionTags(client, TEST_BASE)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seen in the run's own process for every test, on whichever worker it ran (a build that failed in a fixture's
    set-up counts: what it left goes too)."""
    if "docker" in report.keywords:
        _state["docker_ran"] = True


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    tags = _state["tags"]
    if not isinstance(tags, SessionTags) or not _state["docker_ran"]:
        return
    try:
        tags.remove_made()
    except RuntimeError as e:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(str(e), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
