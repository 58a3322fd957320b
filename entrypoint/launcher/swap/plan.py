"""The models one pod swaps between (VL_SWAP), each with the launcher's full plan, computed at start.

The set is VL_MODEL's model first, then the pairs of VL_SWAP (`served-name:catalogue-key`). A pair whose
key is VL_MODEL's gives it its served name; a pair whose served name is VL_MODEL's model's is replaced by
VL_MODEL (VL_MODEL picks the quant that serves that name). Every model is planned now, against this host,
so that a pair that cannot run here stops the start instead of a swap hours later.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..catalogue import GPU_FAMILIES, ModelSpec, fits_family, generic_model
from ..cmdline import ContainerArgs
from ..report import EXIT_CONFIG, Decision, LaunchError
from ..knobs import BadValue, Settings, repo_id
from ..probe import Host
from .sleepmode import SleepCandidate, SleepPlan, Slot, decide_sleep, host_ram_gib
from ...contract import SwapConfig, SwapTarget, swap_mode
from ...modelnames import served_names

if TYPE_CHECKING:
    from ..decide import Plan

# The script's wait for the GPU's memory after a stop: below 3,000 MiB used, polled for up to 90 s.
VRAM_FREE_MIB = 3000
VRAM_WAIT_S = 90.0


@dataclass(frozen=True)
class PlannedModel:
    name: str  # the served name clients send
    key: str  # catalogue key (or VL_MODEL's repo id)
    plan: Plan

    def as_json(self) -> dict:
        return {"name": self.name, "key": self.key, **self.plan.as_json()}


@dataclass(frozen=True)
class SwapSet:
    models: tuple[PlannedModel, ...]  # the first one starts first
    nvidia_smi: str  # the host probe's: it tells when a stopped vLLM's memory is released
    drain_s: float
    stop_s: float
    load_s: float
    sleep_level: int = 0  # sleepmode.py: 1 or 2, every model started once; 0: restart-based swaps

    def as_json(self) -> dict:
        return {"models": [model.as_json() for model in self.models], "drain_s": self.drain_s,
                "stop_s": self.stop_s, "load_s": self.load_s, "vram_free_mib": VRAM_FREE_MIB,
                "vram_wait_s": VRAM_WAIT_S, "mode": swap_mode(self.sleep_level)}

    def for_bridge(self) -> SwapConfig:
        """What the bridge needs to route and answer /v1/models (its --swap argument)."""
        return SwapConfig(tuple(SwapTarget(m.name, m.key, m.plan.model, m.plan.max_model_len, served_names(m.plan.argv),
                                           m.plan.bridge.upstream if self.sleep_level and m.plan.bridge else None)
                                for m in self.models), self.drain_s, self.load_s, self.sleep_level)


def _pair_error(name: str, key: str, what: str, fix: str) -> LaunchError:
    return LaunchError(subject="VL_SWAP", value=f"{name}:{key}", problem=f"VL_SWAP pair '{name}:{key}' {what}", fix=fix,
                       exit_code=EXIT_CONFIG)


def swap_members(first: ModelSpec, pairs: tuple[tuple[str, str], ...], catalogue: dict[str, ModelSpec],
                 host: Host) -> tuple[list[tuple[str, ModelSpec]], list[Decision]]:
    """(served name, model) for each model of the set, VL_MODEL's first; refuses pairs this host cannot run."""
    sms = [gpu.sm for gpu in host.gpus]
    first_name = first.served_name
    others: list[tuple[str, ModelSpec]] = []
    decisions = []
    by_repo = {spec.repo: spec for spec in catalogue.values()}
    for name, key in pairs:
        if key in catalogue or key in by_repo:
            spec = catalogue.get(key) or by_repo[key]
        else:
            try:
                spec = generic_model(repo_id(key))  # a repository outside the catalogue, as VL_MODEL takes it
            except BadValue:
                raise _pair_error(name, key, f"names no catalogue model: accepted keys are {', '.join(catalogue)}, "
                                             "or a Hugging Face repo id such as owner/name",
                                  "Fix the pair, or set VL_SWAP=off.") from None
        key = spec.key
        if not fits_family(spec, sms):
            fitting = ", ".join(k for k, s in catalogue.items() if fits_family(s, sms))
            gpus = ", ".join(sorted({f"{gpu.name} ({gpu.compute_cap})" for gpu in host.gpus}))
            raise _pair_error(name, key, f"cannot run on this host: {key} needs {GPU_FAMILIES[spec.gpu_family][1]} "
                                         f"GPUs ({spec.gpu_family_why}); this host has {gpus}",
                              f"Remove the pair, or pick a key that fits: {fitting}.")
        if key == first.key:
            first_name = name
        elif name == first.served_name:
            decisions.append(Decision("swap", f"VL_MODEL={first.key} serves {name!r} instead of {key}",
                                      f"VL_SWAP pair '{name}:{key}' names VL_MODEL's served name: VL_MODEL picks "
                                      "which model answers to it"))
        else:
            others.append((name, spec))
    members = [(first_name, dataclasses.replace(first, served_name=first_name))]
    members += [(name, dataclasses.replace(spec, served_name=name)) for name, spec in others]
    return members, decisions


def _client_names(name: str) -> tuple[str, ...]:
    """Every name a client may send for the served name `name` (the bridge's NameMap)."""
    from ...modelnames import NameMap  # stdlib only, like the launcher

    return tuple(NameMap.of([name]).by_name)


def check_swap_set(settings: Settings, first: ModelSpec, catalogue: dict[str, ModelSpec],
                   host: Host) -> tuple[list[tuple[str, ModelSpec]], list[Decision]] | None:
    """VL_SWAP's checks that need no plan: the bridge on, every pair's key in the catalogue and fitting the host's
    GPUs, two models at least, no name a client sends for one model that is another's. (served name, model) for
    each, VL_MODEL's first, and the decisions; None without VL_SWAP. `runpod template` runs them too."""
    pairs = settings.value("VL_SWAP")
    if not pairs:
        return None
    if settings.value("VL_BRIDGE") == "off":
        raise LaunchError(subject="VL_BRIDGE", value="off",
                          problem="VL_SWAP needs the keep-alive bridge, which holds clients while vLLM restarts with "
                                  "another model, but VL_BRIDGE=off",
                          fix="set VL_BRIDGE=keepalive, or VL_SWAP=off.")
    members, notes = swap_members(first, pairs, catalogue, host)
    if len(members) < 2:
        raw_swap = settings.by_name['VL_SWAP'].raw
        raise LaunchError(subject="VL_SWAP", value=raw_swap,
                          problem=f"VL_SWAP={raw_swap!r} leaves one model ({members[0][0]}, VL_MODEL's)",
                          fix="name at least one other model, or set VL_SWAP=off.")
    owner: dict[str, str] = {}
    for name, _ in members:
        for spelling in _client_names(name):
            if owner.get(spelling, name) != name:
                raise LaunchError(subject="VL_SWAP", value=name,
                                  problem=f"VL_SWAP: the served name {name!r} is also what clients send for "
                                          f"{owner[spelling]!r} (the bridge routes {spelling!r} to it, as Claude Code "
                                          "names it)",
                                  fix="rename one of them.")
            owner[spelling] = name
    return members, notes


def _plan_all(members: list[tuple[str, ModelSpec]], plan_for: Callable[[ModelSpec, Slot | None], Plan],
              sleep: SleepPlan | None) -> list[PlannedModel]:
    models = []
    for position, (name, spec) in enumerate(members):
        slot = Slot(position, sleep.util_cap) if sleep and sleep.level else None
        try:
            plan = plan_for(spec, slot)
        except LaunchError as err:
            if position == 0:
                raise
            raise _pair_error(name, spec.key, f"cannot be planned on this host: {err.problem}", err.fix) from None
        models.append(PlannedModel(name, spec.key, plan))
    return models


def _member(model: PlannedModel, spec: ModelSpec) -> SleepCandidate:
    args = ContainerArgs.of(list(model.plan.argv[3:]))  # `vllm serve MODEL` then its options
    return SleepCandidate(model.name, spec.weights_gib, args.speculative_config is not None,
                  args.last("load-format") == "dummy")


def decide_swap_set(settings: Settings, first: ModelSpec, catalogue: dict[str, ModelSpec], host: Host,
                    plan_for: Callable[[ModelSpec, Slot | None], Plan], args: ContainerArgs | None = None,
                    ram_gib: Callable[[], float | None] = host_ram_gib) -> SwapSet | None:
    """Every model's plan, VL_MODEL's first, or None without VL_SWAP. plan_for: decide.build_plan for one model,
    in its slot of a sleeping set; ram_gib: the host's RAM available (sleepmode.host_ram_gib)."""
    checked = check_swap_set(settings, first, catalogue, host)
    if checked is None:
        return None
    members, notes = checked
    models = _plan_all(members, plan_for, None)
    sleep = decide_sleep([_member(model, spec) for model, (_, spec) in zip(models, members)],
                         settings.value("VL_SWAP_SLEEP"), settings.source("VL_SWAP_SLEEP"), ram_gib(),
                         host.min_memory_mib / 1024, settings.value("VL_DP"))
    if sleep.level:
        if args is not None and args.port is not None:
            raise LaunchError(subject="--port", value=str(args.port),
                              problem=f"--port {args.port} among the container arguments with sleep-mode swaps "
                                      f"({sleep.mode}): each model's vLLM listens on its own port, from "
                                      "VL_INTERNAL_PORT up",
                              fix="Set VL_INTERNAL_PORT instead of --port, or VL_SWAP_SLEEP=off.")
        models = _plan_all(members, plan_for, sleep)
    names = ", ".join(f"{m.name} ({m.key})" for m in models)
    how = ("a request naming another model puts the loaded one to sleep and wakes that one; each model starts once, "
           f"one after another, {models[0].name} awake at the end" if sleep.level else
           f"a request naming another model swaps vLLM; SIGKILL {settings.value('VL_SWAP_STOP'):g} s after SIGTERM")
    decision = Decision("swap", f"{len(models)} models: {names}; {models[0].name} starts first",
                        f"VL_SWAP from {settings.source('VL_SWAP')}; {how} (running requests get "
                        f"{settings.value('VL_SWAP_DRAIN'):g} s, health within {settings.value('VL_SWAP_LOAD'):g} s)")
    first_plan = models[0].plan
    first_plan = dataclasses.replace(first_plan, decisions=(*first_plan.decisions, *notes, sleep.decision, decision))
    models[0] = dataclasses.replace(models[0], plan=first_plan)
    return SwapSet(tuple(models), host.nvidia_smi, settings.value("VL_SWAP_DRAIN"), settings.value("VL_SWAP_STOP"),
                   settings.value("VL_SWAP_LOAD"), sleep.level)
