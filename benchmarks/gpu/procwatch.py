"""vLLM's processes under the launcher, read from /proc: which one is the API server, when its engine core began.

The launcher's children include the bridge (`bridge.py ... serve ...`) as well as vLLM (`vllm serve MODEL ...`): the
API server is the process whose command line has the `vllm` script followed by `serve`, not any command line that
holds the word. Its engine core is its first child other than multiprocessing's resource tracker (spawn starts one);
that child's start time, from /proc, marks where the API server's set-up ends and the engine core's imports begin,
which vLLM logs nowhere (its first engine-core line comes after them).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PROC = Path("/proc")


def is_vllm_server(cmdline: bytes) -> bool:
    """`cmdline` (NUL-separated, as /proc/PID/cmdline) runs vLLM's `vllm` script with `serve` as its command."""
    words = cmdline.split(b"\0")
    return any(os.path.basename(word) == b"vllm" and after == b"serve" for word, after in zip(words, words[1:]))


def parent_of(pid: int) -> int | None:
    try:
        return int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def cmdline_of(pid: int) -> bytes:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def children_of(parent: int) -> list[int]:
    return sorted(int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit() and parent_of(int(entry.name)) == parent)


def descendants_of(root: int) -> list[int]:
    found, frontier = [], [root]
    while frontier:
        kids = [kid for pid in frontier for kid in children_of(pid)]
        found += kids
        frontier = kids
    return found


def find_vllm_server(launcher: int, deadline_s: float) -> int | None:
    """vLLM's API server under the launcher's process tree, found within deadline_s, or None."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for pid in descendants_of(launcher):
            if is_vllm_server(cmdline_of(pid)):
                return pid
        time.sleep(0.05)
    return None


def started_epoch(pid: int) -> float | None:
    """When the process began, as epoch seconds (/proc/PID/stat's starttime, in clock ticks after boot)."""
    try:
        ticks = int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in (PROC / "stat").read_text().splitlines() if line.startswith("btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


class EngineCoreWatch(threading.Thread):
    """Finds vLLM's API server under `launcher`, then the start of its engine core (epoch seconds), in the
    background; `server` and `engine_core_started` stay None when they do not appear within deadline_s."""

    def __init__(self, launcher: int, deadline_s: float = 300) -> None:
        super().__init__(daemon=True)
        self.launcher, self.deadline_s = launcher, deadline_s
        self.server: int | None = None
        self.engine_core: int | None = None
        self.engine_core_started: float | None = None
        self.found_server = threading.Event()

    def run(self) -> None:
        began = time.monotonic()
        self.server = find_vllm_server(self.launcher, self.deadline_s)
        self.found_server.set()
        while self.server is not None and time.monotonic() - began < self.deadline_s:
            for pid in children_of(self.server):
                if b"resource_tracker" not in cmdline_of(pid):
                    self.engine_core, self.engine_core_started = pid, started_epoch(pid)
                    return
            time.sleep(0.05)
