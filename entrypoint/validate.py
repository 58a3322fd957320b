"""Checks across several inputs, which one knob's parser cannot make (issue 10).

Each stops the launcher with the variables named, before vLLM would fail on them later.
"""

from __future__ import annotations

from .errors import LaunchError
from .knobs import Settings


def check_settings(settings: Settings) -> None:
    """Knob against knob: run right after the knobs are resolved, before the host probe."""
    look_min, look_max = settings.value("VL_LOOK_MIN"), settings.value("VL_LOOK_MAX")
    if look_min > look_max:
        # vLLM's SpeculativeConfig refuses prompt_lookup_min > prompt_lookup_max at start.
        raise LaunchError(f"VL_LOOK_MIN={look_min} is above VL_LOOK_MAX={look_max}: accepted values are "
                          "VL_LOOK_MIN <= VL_LOOK_MAX (ngram lookup window, e.g. 2 and 16).")


def check_numa_nodes(settings: Settings, gpus_used: int) -> None:
    """VL_NUMA_NODES against the GPUs vLLM will start workers on (one node per GPU)."""
    nodes = settings.value("VL_NUMA_NODES")
    if settings.value("VL_NUMA") and len(nodes) > gpus_used:
        raise LaunchError(
            f"VL_NUMA_NODES={' '.join(map(str, nodes))!r} names {len(nodes)} NUMA nodes but vLLM runs on "
            f"{gpus_used} GPU(s) (VL_TP x VL_DP): accepted values are one node per GPU, e.g. "
            f"{' '.join(['0'] * gpus_used)!r}; or VL_NUMA=off.")
