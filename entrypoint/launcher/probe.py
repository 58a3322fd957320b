"""Probe the host's GPUs with one nvidia-smi query (run and read by ../nvidiasmi.py, as every reader does)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping

from .. import nvidiasmi
from .report import EXIT_HOST, LaunchError

QUERY_FIELDS = ("index", "name", "memory.total", "driver_version", "compute_cap")
QUERY_ARGS = nvidiasmi.query_args(QUERY_FIELDS)
# nvidia-smi can hang on a wedged driver; a pod that never starts is worse than an error.
PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int
    compute_cap: str  # "8.6"

    @property
    def sm(self) -> tuple[int, int]:
        major, _, minor = self.compute_cap.partition(".")
        return int(major), int(minor or 0)


@dataclass(frozen=True)
class Host:
    nvidia_smi: str
    driver_version: str  # "580.159.04"
    gpus: tuple[Gpu, ...]

    @property
    def driver_major(self) -> int:
        return int(self.driver_version.split(".", 1)[0])

    @property
    def min_memory_mib(self) -> int:
        return min(gpu.memory_mib for gpu in self.gpus)


def _host_error(nvidia_smi: str, what: str, fix: str) -> LaunchError:
    return LaunchError(subject=nvidia_smi, value=None, problem=f"host probe: {what}", fix=fix, exit_code=EXIT_HOST)


_ANOTHER_HOST = "the driver's view of the GPUs is inconsistent, use another host."


def find_nvidia_smi(env: Mapping[str, str]) -> str:
    wanted = nvidiasmi.path(env)
    found = shutil.which(wanted, path=env.get("PATH", os.defpath))
    if found is None:
        raise _host_error(
            wanted, f"nvidia-smi not found ({wanted!r}; VL_NVIDIA_SMI overrides the path). The container sees "
            "no NVIDIA driver", "start it with GPUs (`docker run --gpus all`, or a GPU pod).")
    return found


_INDEX = re.compile(r"[0-9]{1,4}")
_MEMORY = re.compile(r"-?[0-9]{1,9}")
_DRIVER = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){0,3}")
_COMPUTE_CAP = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}")


def parse_query(text: str, nvidia_smi: str) -> Host:
    gpus, drivers, other = [], set(), []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            # Not an answer line: a driver or persistence-mode warning some hosts print on stdout.
            other.append(line)
            continue
        index, name, memory, driver, cap = cells
        # ASCII patterns: int() would also read "٣", "+5" or "1_0"; "[N/A]" or garbage stops here, not later
        if not (_INDEX.fullmatch(index) and name and _MEMORY.fullmatch(memory) and _DRIVER.fullmatch(driver)
                and _COMPUTE_CAP.fullmatch(cap)):
            raise _host_error(nvidia_smi, f"{nvidia_smi} line {number} is not index,name,MiB,driver,compute_cap: "
                              f"{line!r}", f"point VL_NVIDIA_SMI at the driver's nvidia-smi, or {_ANOTHER_HOST}")
        gpu = Gpu(int(index), name, int(memory), cap)
        if gpu.memory_mib <= 0:
            raise _host_error(nvidia_smi, f"{nvidia_smi} reports {gpu.memory_mib} MiB for GPU {gpu.index} ({name})",
                              "a GPU without memory cannot serve; the driver or the GPU is failing, use another host.")
        if any(other.index == gpu.index for other in gpus):
            raise _host_error(nvidia_smi, f"{nvidia_smi} lists GPU index {gpu.index} twice (line {number}: {line!r})",
                              _ANOTHER_HOST)
        gpus.append(gpu)
        drivers.add(driver)
    if not gpus:
        said = f". It printed: {' | '.join(other)[:2000]!r}" if other else ""
        raise _host_error(nvidia_smi, f"{nvidia_smi} lists no GPU (expected lines of {len(QUERY_FIELDS)} fields: "
                          f"{','.join(QUERY_FIELDS)}){said}", "Start the container with GPUs (`--gpus all`).")
    if len(drivers) != 1:
        raise _host_error(nvidia_smi, f"{nvidia_smi} reports several driver versions: {sorted(drivers)}", _ANOTHER_HOST)
    return Host(nvidia_smi, drivers.pop(), tuple(gpus))


def _run(command: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
    try:
        return nvidiasmi.run(command, env, PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise _host_error(command[0], f"{command[0]} did not answer within {PROBE_TIMEOUT_S:g} s (driver wedged?)",
                          "use another host, or restart this one.") from None


def probe_host(env: Mapping[str, str]) -> Host:
    nvidia_smi = find_nvidia_smi(env)
    try:
        returncode, output, warnings = _run([nvidia_smi, *QUERY_ARGS], env)
    except OSError as err:
        raise _host_error(nvidia_smi, f"{nvidia_smi} cannot run: {err}",
                          "point VL_NVIDIA_SMI at the driver's nvidia-smi, or start the container with GPUs "
                          "(`--gpus all`).") from None
    if returncode != 0:
        said = (output.strip() + "\n" + warnings.strip()).strip()[:2000] or "no output"
        raise _host_error(nvidia_smi, f"{nvidia_smi} failed (exit {returncode}): {said}. No usable GPU",
                          "start the container with GPUs (`--gpus all`).")
    return parse_query(output, nvidia_smi)  # what it printed on stderr (warnings) never stops a pod
