"""nvidia-smi, the one reader of the GPUs in both processes: the launcher's probe (launcher/probe.py), the
swap's wait for a stopped vLLM's memory (launcher/swap/control.py) and the status page's memory (serving/gpus.py).

One way to run it: in its own process group, its output into files, not pipes (a child it leaves behind
holding its output cannot make a reader wait past the time-out for an end of file), its whole group killed
on a time-out and once it exited, so no child of it keeps holding the driver. One way to read it: CSV
without header or units, one GPU a line. Stdlib only, like the launcher.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from typing import Mapping

from .contract import NVIDIA_SMI_VARIABLE


def path(env: Mapping[str, str]) -> str:
    """The nvidia-smi both processes run: VL_NVIDIA_SMI, else the one on PATH."""
    return env.get(NVIDIA_SMI_VARIABLE) or "nvidia-smi"


def query_args(fields: tuple[str, ...]) -> tuple[str, ...]:
    return ("--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(command: list[str], env: Mapping[str, str] | None, timeout_s: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr). OSError when it cannot start; subprocess.TimeoutExpired past timeout_s.
    A broken driver may print bytes that are not UTF-8: shown escaped, never a UnicodeDecodeError."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   env=None if env is None else dict(env), start_new_session=True)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.wait()
            raise
        _kill_group(process.pid)
        out.seek(0)
        err.seek(0)
        return (process.returncode, out.read().decode("utf-8", errors="replace"),
                err.read().decode("utf-8", errors="replace"))


def rows(text: str, width: int) -> tuple[list[list[str]], list[str]]:
    """The answer's lines as their `width` cells, stripped; and the other non-empty lines (a driver or
    persistence-mode warning some hosts print on stdout)."""
    found, other = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        (found if len(cells) == width else other).append(cells if len(cells) == width else line)
    return found, other


def query(nvidia_smi: str, fields: tuple[str, ...], env: Mapping[str, str] | None,
          timeout_s: float) -> tuple[list[list[str]], str | None]:
    """(rows, None), or ([], why not): for the readers that must not fail on a missing or hung nvidia-smi."""
    try:
        code, out, err = run([nvidia_smi, *query_args(fields)], env, timeout_s)
    except OSError as problem:
        return [], f"cannot run {nvidia_smi}: {problem.strerror or problem}"
    except subprocess.TimeoutExpired:
        return [], f"{nvidia_smi} did not answer within {timeout_s:g} s"
    if code != 0:
        return [], f"{nvidia_smi} exited with {code}: {err.strip()[:200]}"
    return rows(out, len(fields))[0], None


async def query_async(nvidia_smi: str, fields: tuple[str, ...], timeout_s: float) -> tuple[list[list[str]], str | None]:
    """query() for the bridge's event loop, in a thread."""
    import asyncio  # the bridge's only: the launcher starts without asyncio's import time

    return await asyncio.to_thread(query, nvidia_smi, fields, None, timeout_s)
