"""How a swap set changes models: vLLM's sleep mode, or a restart. Decided at start, from the host's RAM and
the models (VL_SWAP_SLEEP=auto), or by the user (1, 2, off).

- Level 1: every model is started once; a sleeping vLLM keeps its weights in pinned host RAM and ~2 GiB of
  GPU memory; a wake copies them back (0.44-0.50 s for an 8B-like model on an H200). Needs host RAM for the
  weights of every model but the awake one.
- Level 2: the sleeping vLLM discards its weights; a wake reloads them from disk (`reload_weights`: 3.0 s
  from the page cache for the same model). vLLM 0.27.1 reloads the target model only (gpu_model_runner.py
  `reload_weights`), not a speculative draft, and cannot reload `--load-format dummy`: such sets restart.
- Off (restart): stop vLLM, start the other model (minutes: 49.8 s for an 8B-like model with a warm
  compile cache, 177 s cold).
With sleep, each vLLM gets the GPU memory minus what the sleeping ones keep (SLEEP_KEEP_GIB each), and its
own port (VL_INTERNAL_PORT + its place in the set). Stdlib only, like the launcher.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from ..report import EXIT_CONFIG, Decision, LaunchError
from ...contract import swap_mode

# GPU memory a sleeping vLLM keeps on each of its GPUs (CUDA context, CUDA graphs, buffers outside vLLM's
# sleep pool): 1.9 GiB measured on an H200 (8B-like model), rounded up for larger graphs.
SLEEP_KEEP_GIB = 2.5
MARGIN_GIB = 0.5  # left free beside the awake vLLM's share and the sleepers'
# Host RAM a vLLM process uses itself (API server, EngineCore, torch), asleep or not, beside offloaded weights.
PROCESS_RAM_GIB = 4.0
RAM_SHARE = 0.85  # of the RAM available at start that level 1 may plan to fill
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"  # vLLM registers /sleep, /wake_up, /collective_rpc... with it
MEMINFO = "/proc/meminfo"
CGROUP = "/sys/fs/cgroup"


@dataclass(frozen=True)
class SleepCandidate:
    """What the decision needs of one model of the set."""
    name: str
    weights_gib: float | None  # None: unknown (a model outside the catalogue)
    speculates: bool  # a draft model or MTP head: vLLM 0.27.1's reload_weights does not reload it
    dummy_weights: bool  # --load-format dummy: nothing on disk to reload


@dataclass(frozen=True)
class SleepPlan:
    level: int  # 1 or 2; 0: restart-based swaps
    decision: Decision
    util_cap: float | None = None  # the highest --gpu-memory-utilization each vLLM may get

    @property
    def mode(self) -> str:
        return swap_mode(self.level)


@dataclass(frozen=True)
class Slot:
    """One model's place in a swap set whose models sleep: what build_plan changes for it."""
    index: int  # its vLLM listens on the internal port + index
    util_cap: float  # its --gpu-memory-utilization at most


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def host_ram_gib(meminfo: str = MEMINFO, cgroup: str = CGROUP) -> float | None:
    """RAM this container may still fill: MemAvailable, or less where its cgroup's limit is nearer (pinned host
    buffers count against a pod's memory limit). None when /proc/meminfo cannot be read."""
    text = _read(meminfo)
    available = None
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        if name == "MemAvailable" and rest.split()[:1] and rest.split()[0].isascii() and rest.split()[0].isdigit():
            available = int(rest.split()[0]) / (1 << 20)
    if available is None:
        return None
    for limit_file, usage_file in (("memory.max", "memory.current"),
                                   ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        limit, usage = _read(os.path.join(cgroup, limit_file)), _read(os.path.join(cgroup, usage_file))
        if limit and usage and limit.strip().isdigit() and usage.strip().isdigit():
            room = (int(limit) - int(usage)) / (1 << 30)
            if room < available:
                available = max(room, 0.0)
            break
    return available


def util_cap(gpu_gib: float, sleepers: int) -> float:
    """The share of a GPU one awake vLLM may take while `sleepers` others keep SLEEP_KEEP_GIB each on it."""
    return round((gpu_gib - sleepers * SLEEP_KEEP_GIB - MARGIN_GIB) / gpu_gib, 3)


def decide_sleep(members: Sequence[SleepCandidate], choice: str, source: str, ram_gib: float | None, gpu_gib: float,
                 data_parallel: int) -> SleepPlan:
    """choice: VL_SWAP_SLEEP (auto, 1, 2, off); ram_gib: host_ram_gib(); gpu_gib: the smallest GPU's memory."""
    knob = f"VL_SWAP_SLEEP={choice} ({source})"
    if choice == "off":
        return SleepPlan(0, Decision("swap-mode", "restart", f"{knob}: a swap stops vLLM and starts the other model"))
    no_level2 = [m.name for m in members if m.speculates or m.dummy_weights]
    why_no_level2 = (f"{', '.join(no_level2)}: vLLM 0.27.1 reloads neither a speculative draft nor dummy weights "
                     "after a level-2 sleep")
    sleeping = [m.weights_gib for m in members]
    known = all(w is not None for w in sleeping)
    need = (sum(sleeping) - min(sleeping) if known else None)  # every model but the awake one, at worst
    need_ram = None if need is None else need + PROCESS_RAM_GIB * len(members)
    room = None if ram_gib is None else ram_gib * RAM_SHARE
    ram_text = "unknown" if ram_gib is None else f"{ram_gib:.1f} GiB"
    fits = need_ram is not None and room is not None and need_ram <= room
    unknown = [m.name for m in members if m.weights_gib is None]
    ram_why = (f"level 1 keeps the sleeping models' weights in host RAM: {need:.1f} GiB of weights + "
               f"{PROCESS_RAM_GIB:g} GiB per vLLM = {need_ram:.1f} GiB, host RAM available {ram_text}"
               if need_ram is not None else
               f"level 1 keeps the sleeping models' weights in host RAM, and the size of {', '.join(unknown)}'s "
               "weights is unknown (outside the catalogue)")
    cap = util_cap(gpu_gib, len(members) - 1)
    if data_parallel > 1:
        if choice in ("1", "2"):
            raise LaunchError(subject="VL_SWAP_SLEEP", value=choice,
                              problem=f"{knob} with VL_DP={data_parallel}: sleep mode is not used with data parallel "
                                      "(not shown to work on a pod here)",
                              fix="set VL_SWAP_SLEEP=off or auto, or VL_DP=1.", exit_code=EXIT_CONFIG)
        return SleepPlan(0, Decision("swap-mode", "restart", f"{knob}; VL_DP={data_parallel}: sleep mode is not "
                                                             "used with data parallel"))
    if cap <= 0.3:
        raise LaunchError(subject="VL_SWAP", value=None,
                          problem=f"VL_SWAP: {len(members)} models on a {gpu_gib:.0f} GiB GPU leave the awake one "
                                  f"{cap:.2f} of it once the others sleep ({SLEEP_KEEP_GIB:g} GiB each)",
                          fix="name fewer models, or set VL_SWAP_SLEEP=off (restart-based swaps).",
                          exit_code=EXIT_CONFIG)
    if choice == "1":
        if need_ram is not None and room is not None and not fits:
            raise LaunchError(subject="VL_SWAP_SLEEP", value=choice,
                              problem=f"{knob}: {ram_why}, more than {RAM_SHARE:.0%} of it",
                              fix="Set VL_SWAP_SLEEP=2 (weights reloaded from disk at each wake) or off, or name fewer "
                                  "or smaller models.", exit_code=EXIT_CONFIG)
        level, why = 1, f"{knob}; {ram_why}"
    elif choice == "2":
        if no_level2:
            raise LaunchError(subject="VL_SWAP_SLEEP", value=choice, problem=f"{knob}: {why_no_level2}",
                              fix="Set VL_SWAP_SLEEP=1 (weights kept in host RAM) or off.", exit_code=EXIT_CONFIG)
        level, why = 2, f"{knob}; a wake reloads the weights from disk"
    elif fits:
        level, why = 1, f"{knob}; {ram_why}"
    elif not no_level2:
        level, why = 2, f"{knob}; {ram_why}: level 2 instead, a wake reloads the weights from disk"
    else:
        return SleepPlan(0, Decision("swap-mode", "restart", f"{knob}; {ram_why}; level 2: {why_no_level2}"))
    return SleepPlan(level, Decision("swap-mode", swap_mode(level),
                                     f"{why}; each vLLM at most {cap:g} of the GPU ({len(members) - 1} asleep keep "
                                     f"{SLEEP_KEEP_GIB:g} GiB each)"), cap)
