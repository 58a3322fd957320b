"""Processes the tests leave behind, found by a mark in their environment.

Every process the suite starts inherits two variables: RUN_MARK (this run of the suite, set by .ci/run or by
tests/conftest.py) and STARTED_BY (the test or fixture that was running when it started; tests/conftest.py sets it
around each fixture's setup and each test's call). A launcher's children, a daemon that left its session, a process
re-parented to PID 1: all keep them, so /proc/*/environ finds them wherever they went. Docker containers do not
inherit them (their processes are the engine's), which is why the engine's leftovers are prebake_testing.engine's.

`python -m prebake_testing.leftovers RUN` (what .ci/run calls after the tests) names every process of that run still
running, ends it, and exits 1 if there was any.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

RUN_MARK = "PREBAKE_TEST_RUN"
STARTED_BY = "PREBAKE_TEST_STARTED_BY"


@dataclass(frozen=True)
class Leftover:
    pid: int
    started_by: str  # the test or fixture, or "" when outside any
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.started_by or 'outside any test'}): {self.command}"


def _environ(pid: str) -> dict[bytes, bytes] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone meanwhile, or not ours to read
        return None
    return dict(entry.partition(b"=")[::2] for entry in raw.split(b"\0") if entry)


def _command(pid: str) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")[:300] or "(zombie or kernel thread)"


def _zombie(pid: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"  # exited, not yet reaped: it runs nothing


def _of_run(environ: dict[bytes, bytes], run: str) -> bool:
    """Marked with `run`, or with a run nested in it (a pytest run inside a test: prebake_testing.leftover_check)."""
    mark = environ.get(RUN_MARK.encode(), b"")
    return mark == run.encode() or mark.startswith(run.encode() + b"/")


def find(run: str, started_by: str | None = None, exclude: frozenset[int] = frozenset()) -> list[Leftover]:
    """The running processes marked with `run` (and with `started_by`, when given); never this process."""
    exclude = exclude | {os.getpid()}
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in exclude:
            continue
        environ = _environ(pid)
        if not environ or not _of_run(environ, run):
            continue
        by = environ.get(STARTED_BY.encode(), b"").decode(errors="replace")
        if started_by is not None and by != started_by:
            continue
        if not _zombie(pid):
            found.append(Leftover(int(pid), by, _command(pid)))
    return found


def end(leftovers: list[Leftover], run: str) -> None:
    """SIGKILL each, once it is checked to be still the process found (a pid may have been reused)."""
    for leftover in leftovers:
        environ = _environ(str(leftover.pid))
        if environ and _of_run(environ, run):
            try:
                os.kill(leftover.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0]:
        print(f"usage: python -m prebake_testing.leftovers RUN (the value of {RUN_MARK} the tests ran with)",
              file=sys.stderr)
        return 2
    run = argv[0]
    left = find(run)
    if not left:
        print(f"no process of this test run ({RUN_MARK}={run}) is left running")
        return 0
    print(f"{len(left)} process(es) the tests started are still running ({RUN_MARK}={run}); ending them:")
    for leftover in left:
        print(f"  {leftover}")
    end(left, run)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
