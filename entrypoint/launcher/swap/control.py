"""What a swap does to processes, for supervise.py: the channel's launcher end, stopping vLLM's whole
process group as the bootstrap script did, and waiting for the GPU's memory to be released.

The channel's messages are swapchannel.py's (one JSON line each).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import time
from typing import Callable, Iterator, Mapping

from ... import nvidiasmi
from ...swapchannel import Command, Event, line_of, read_command

PR_SET_CHILD_SUBREAPER = 36
MEMORY_QUERY_TIMEOUT_S = 10.0
GROUP_GONE_S = 5.0  # after SIGKILL, how long the group's last processes may take to vanish


def become_subreaper() -> bool:
    """Orphans of vLLM (its EngineCore, once the API server is gone) become our children, so that we can see
    them go and reap them, whatever PID 1 is. Linux only; False where it is not available."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class Control:
    """The launcher's end of the channel: non-blocking reads of whole lines, blocking writes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self.buffer = b""
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def commands(self) -> Iterator[Command]:
        while not self.closed:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:
                self.closed = True  # the bridge is gone; its exit is reaped like any child's
                break
            self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            command = read_command(line)
            if command is not None:
                yield command

    def send(self, event: Event) -> None:
        if self.closed:
            return
        data = line_of(event)
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True
        finally:
            self.sock.setblocking(False)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(pid: int, exited: Callable[[], int | None], reap: Callable[[], None], grace_s: float,
               log: Callable[[str], None]) -> None:
    """The script's stop: SIGTERM to vLLM's process group, SIGKILL to the group if the API server is still
    there after grace_s, then SIGKILL to whatever of the group survived it (vLLM's EngineCore outlives
    its parent and keeps the GPU's memory), until the group is gone.

    pid: the group's leader (started in its own session); exited(): its exit code once reaped, else None;
    reap(): reaps every child that ended (the leader, and orphans of the group: we are their subreaper)."""
    if exited() is None:
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while exited() is None and time.monotonic() < deadline:
            time.sleep(0.02)
            reap()
        if exited() is None:
            log(f"vLLM (process group {pid}) still running {grace_s:g} s after SIGTERM: SIGKILL to the group")
            _signal_group(pid, signal.SIGKILL)
            while exited() is None:
                time.sleep(0.02)
                reap()
    reap()
    if _group_exists(pid):
        log(f"processes of vLLM's group {pid} outlived it (EngineCore holds the GPU's memory): SIGKILL")
        _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + GROUP_GONE_S
        while _group_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
            reap()


def memory_used_mib(nvidia_smi: str, env: Mapping[str, str]) -> list[int] | None:
    """memory.used of every GPU, or None when nvidia-smi does not answer sensibly."""
    found, problem = nvidiasmi.query(nvidia_smi, ("memory.used",), env, MEMORY_QUERY_TIMEOUT_S)
    values = [int(used) for (used,) in found if re.fullmatch(r"[0-9]{1,9}", used)]
    return values if not problem and values and len(values) == len(found) else None


def wait_for_memory(nvidia_smi: str, env: Mapping[str, str], free_below_mib: int, timeout_s: float,
                    interrupted: Callable[[], bool], poll_s: float = 0.25) -> tuple[bool, list[int] | None]:
    """Until every GPU uses less than free_below_mib (the next vLLM would size itself on memory still held
    otherwise), at most timeout_s. Returns (released, the last reading)."""
    deadline = time.monotonic() + timeout_s
    while True:
        used = memory_used_mib(nvidia_smi, env)
        if used is not None and max(used) < free_below_mib:
            return True, used
        if time.monotonic() >= deadline or interrupted():
            return False, used
        time.sleep(poll_s)
