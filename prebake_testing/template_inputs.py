"""What prebake.runpod.build_template reads, for the tests of RunPod templates: an image tag and a variant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234"


@dataclass(frozen=True)
class Variant:
    """A test double with the fields of prebake.variants.Variant that a template reads."""

    name: str = "a40"
    description: str = "A40 pairs"
    gpus: tuple[str, ...] = ("NVIDIA A40", "NVIDIA RTX A6000")
    launch_defaults: Mapping[str, str] = field(default_factory=lambda: {"VL_MODEL": "ornith", "VL_PORT": "8080"})
