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


def check_numa_nodes(settings: Settings, gpus_used: int, gpus_visible: int) -> None:
    """VL_NUMA_NODES against the GPUs: vLLM 0.27.1 takes one node per visible GPU and looks a
    worker's node up by its GPU index (vllm/utils/numa_utils.py: "GPU index 1 exceeds
    numa_bind_nodes size 1" when the list is shorter than TP x DP)."""
    nodes = settings.value("VL_NUMA_NODES")
    if not settings.value("VL_NUMA"):
        return
    shown = " ".join(map(str, nodes))
    if len(nodes) > gpus_visible:
        raise LaunchError(
            f"VL_NUMA_NODES={shown!r} names {len(nodes)} NUMA nodes but this host has {gpus_visible} GPU(s): "
            f"accepted values are one node per GPU, e.g. {' '.join(['0'] * gpus_visible)!r}; or VL_NUMA=off.")
    if len(nodes) < gpus_used:
        raise LaunchError(
            f"VL_NUMA_NODES={shown!r} names {len(nodes)} NUMA node(s) but vLLM runs on {gpus_used} GPUs "
            f"(VL_TP x VL_DP): accepted values are one node per GPU, at least {gpus_used}; or VL_NUMA=off.")
