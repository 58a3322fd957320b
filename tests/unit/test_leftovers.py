"""No test leaves a process behind: prebake_testing.leftover_check, run on a small suite of its own in a real
pytest, errs on the test or the fixture that left one, ends it, and fails the session; `python -m
prebake_testing.leftovers RUN` (what .ci/run calls at its end) names what is left and fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from prebake_testing.leftover_check import GRACE_VARIABLE
from prebake_testing.leftovers import RUN_MARK, STARTED_BY, find

SUITE = '''
import subprocess, sys, time
import pytest

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_leaks_a_process():
    subprocess.Popen(SLEEPER, start_new_session=True)  # its own session: only the mark still ties it to the test


def test_leaks_a_grandchild_through_an_exited_child():
    # the middle process exits at once: the sleeper is re-parented, as a killed launcher's bridge is
    subprocess.run([sys.executable, "-c",
                    "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])"],
                   check=True)


def test_ends_what_it_starts():
    process = subprocess.Popen(SLEEPER)
    process.kill()
    process.wait()


@pytest.fixture(scope="module")
def server():
    process = subprocess.Popen(SLEEPER)
    raise RuntimeError("the server did not start")  # a failed fixture: nobody stops the process
    yield process


def test_with_a_failed_fixture(server):
    pass
'''


def run_suite(tmp_path: Path, run: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_leaky.py").write_text(SUITE)
    env = {**os.environ, RUN_MARK: run, GRACE_VARIABLE: "0.2"}  # nothing here is slow to exit
    env.pop(STARTED_BY, None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "prebake_testing.leftover_check", "-p",
                           "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path / "test_leaky.py")],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_a_leaked_process_fails_its_test_and_is_ended(tmp_path):
    run = f"selftest-{uuid.uuid4().hex[:8]}"
    result = run_suite(tmp_path, run)
    out = result.stdout
    try:
        assert result.returncode == 1, out + result.stderr
        assert "3 passed, 4 errors" in out, out  # the failed fixture's own error, and its leftover's
        assert "ERROR at teardown of test_leaks_a_process" in out, out
        assert "the test test_leaky.py::test_leaks_a_process left 1 process(es) running (ended now)" in out, out
        assert "the test test_leaky.py::test_leaks_a_grandchild_through_an_exited_child left 1 process(es)" in out
        assert "test_ends_what_it_starts" not in out.split("short test summary info")[-1], out
        assert re.search(r"the module-scoped fixture 'server' \(set up for test_leaky.py, set-up \d+ of pytest process "
                         r"\d+\) left 1 process\(es\) running", out), out
        assert "import time; time.sleep(120)" in out  # the command is named
    finally:
        left = find(run)
    assert left == [], left  # every one was ended, none by this test


def test_the_ci_check_names_what_is_left_and_fails(tmp_path):
    run = f"selftest-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, RUN_MARK: run, STARTED_BY: "tests/x.py::test_y"}
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    try:
        check = [sys.executable, "-m", "prebake_testing.leftovers", run]
        result = subprocess.run(check, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"pid {sleeper.pid} (tests/x.py::test_y): " in result.stdout and "time.sleep(120)" in result.stdout
        assert sleeper.wait(timeout=10) == -9  # ended by it
        again = subprocess.run(check, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and "no process of this test run" in again.stdout, again.stdout
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_ci_check_without_a_run_says_how_to_call_it():
    result = subprocess.run([sys.executable, "-m", "prebake_testing.leftovers"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and RUN_MARK in result.stderr, result.stderr


def test_a_pytest_run_inside_a_test_ends_nothing_of_its_parents(tmp_path):
    """A test of the suite's own machinery runs pytest inside a test (test_tiers.py does): that run gets a run of
    its own, so its checks never take this test's processes (nor another worker's) for its leftovers."""
    (tmp_path / "test_inner.py").write_text("def test_nothing():\n    pass\n")
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # this test's, running
    try:
        inner = subprocess.run([sys.executable, "-m", "pytest", "-p", "prebake_testing.leftover_check", "-p",
                                "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                               capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert inner.returncode == 0, inner.stdout + inner.stderr
        assert mine.poll() is None, "the inner run ended a process of the test that ran it"
    finally:
        mine.kill()
        mine.wait()


def test_a_grace_that_is_not_seconds_is_refused_by_name(tmp_path):
    (tmp_path / "test_inner.py").write_text("def test_nothing():\n    pass\n")
    env = {**os.environ, GRACE_VARIABLE: "soon"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "prebake_testing.leftover_check", "-p",
                             "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode != 0 and "PREBAKE_LEFTOVER_GRACE_S='soon' is not a number of seconds" in \
        result.stdout + result.stderr, result.stdout + result.stderr
