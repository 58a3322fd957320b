"""What a pod start would say, asked before any pod starts: the build side's one door into the launcher.

`prebake runpod template|publish` writes an environment into a template that every pod of it starts with, and the
launcher checks it again at each start (main.make_plan) with these same checks, so that a template holds only what
a pod accepts; `prebake claude-code` names a catalogue model as a pod serves it. prebake imports this module and
contract.py, nothing else of the launcher (tests/unit/test_boundaries.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .bridgeplan import decide_bridge
from .catalogue import load_catalogue, resolve_model
from .cmdline import ContainerArgs
from .knobs import KNOBS_BY_NAME, RETIRED_KNOBS, BadValue, check_settings, exposed_port, resolve
from .probe import Gpu, Host
from .report import LaunchError
from .swap.plan import check_swap_set

__all__ = ["Ignored", "LaunchError", "catalogue_classes", "check_pod_env", "knob_problem", "served_name"]


@dataclass(frozen=True)
class Ignored:
    """A VL_* variable the launcher would take but ignore: retired (old templates still set it), or unknown."""
    name: str
    why: str
    retired: bool


def _variant_host(gpu: tuple[str, str]) -> Host:
    """A host of the variant's pods as the probe describes one: its first GPU and compute capability (the memory and
    the driver play no part in the checks that use it)."""
    name, compute_cap = gpu
    return Host("nvidia-smi", "580.0", (Gpu(0, name, 0, compute_cap),))


def check_pod_env(env: Mapping[str, str], launch_defaults: Mapping[str, str],
                  gpu: tuple[str, str] | None = None) -> tuple[Ignored, ...]:
    """Raise LaunchError (its message the launcher's own) for what a pod start would refuse in `env` over the image's
    `launch_defaults`: each value, values against each other, the ports, VL_MODEL; with `gpu` (the name and compute
    capability of the pods' GPU), VL_SWAP's pairs against the catalogue and that GPU. Returns what it would ignore."""
    settings = resolve(env, launch_defaults)
    check_settings(settings)
    port, why = exposed_port(settings)
    decide_bridge(settings, ContainerArgs.of([]), port, why)
    model = settings.by_name["VL_MODEL"]
    models = load_catalogue()
    first = resolve_model(model.raw.strip(), models, model.source)
    if gpu is not None:
        check_swap_set(settings, first, models, _variant_host(gpu))
    return tuple(Ignored(name, why, name in RETIRED_KNOBS) for name, why in settings.ignored)


def knob_problem(name: str, value: str) -> str | None:
    """None when the launcher's parser of knob `name` takes `value`, else what it accepts."""
    knob = KNOBS_BY_NAME[name]
    try:
        knob.parse(value)
    except BadValue:
        return f"accepted values are {knob.accepted}"
    return None


def served_name(model: str) -> str | None:
    """The name a pod serves catalogue model `model` under, or None when the catalogue has no such model."""
    entry = load_catalogue().get(model)
    return entry.served_name if entry else None


def catalogue_classes(path: str | None = None) -> dict[str, tuple[str, tuple[str, ...]]]:
    """For the build's model-info bake: each catalogue entry's model class (its `architecture`, "" where it names
    none) and the speculation methods it allows."""
    catalogue = load_catalogue(path) if path else load_catalogue()
    return {key: (spec.architecture or "", spec.speculation_allowed) for key, spec in catalogue.items()}
