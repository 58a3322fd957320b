"""Probe the host's GPUs with one nvidia-smi query."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping

from .errors import EXIT_HOST, LaunchError

QUERY_FIELDS = ("index", "name", "memory.total", "driver_version", "compute_cap")
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
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


def _host_error(what: str) -> LaunchError:
    return LaunchError(f"host probe: {what}", EXIT_HOST)


def find_nvidia_smi(env: Mapping[str, str]) -> str:
    wanted = env.get("VL_NVIDIA_SMI") or "nvidia-smi"
    found = shutil.which(wanted, path=env.get("PATH", os.defpath))
    if found is None:
        raise _host_error(
            f"nvidia-smi not found ({wanted!r}; VL_NVIDIA_SMI overrides the path). The container sees "
            "no NVIDIA driver: start it with GPUs (`docker run --gpus all`, or a GPU pod)."
        )
    return found


def parse_query(text: str, nvidia_smi: str) -> Host:
    gpus, drivers = [], set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            raise _host_error(f"{nvidia_smi} line {number} has {len(cells)} fields, expected "
                              f"{len(QUERY_FIELDS)} ({','.join(QUERY_FIELDS)}): {line!r}")
        index, name, memory, driver, cap = cells
        try:
            gpu = Gpu(int(index), name, int(memory), cap)
            gpu.sm, int(driver.split(".", 1)[0])  # "[N/A]" or garbage: refuse here, not later
        except ValueError:
            raise _host_error(f"{nvidia_smi} line {number} is not index,name,MiB,driver,compute_cap: {line!r}") from None
        gpus.append(gpu)
        drivers.add(driver)
    if not gpus:
        raise _host_error(f"{nvidia_smi} lists no GPU. Start the container with GPUs (`--gpus all`).")
    if len(drivers) != 1:
        raise _host_error(f"{nvidia_smi} reports several driver versions: {sorted(drivers)}")
    return Host(nvidia_smi, drivers.pop(), tuple(gpus))


def probe_host(env: Mapping[str, str]) -> Host:
    nvidia_smi = find_nvidia_smi(env)
    try:
        done = subprocess.run([nvidia_smi, *QUERY_ARGS], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, env=dict(env))
    except subprocess.TimeoutExpired:
        raise _host_error(f"{nvidia_smi} did not answer within {PROBE_TIMEOUT_S} s (driver wedged?)") from None
    except OSError as err:
        raise _host_error(f"{nvidia_smi} cannot run: {err}") from None
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip() or "no output"
        raise _host_error(f"{nvidia_smi} failed (exit {done.returncode}): {said}. "
                          "No usable GPU: start the container with GPUs (`--gpus all`).")
    return parse_query(done.stdout, nvidia_smi)
