"""The image's entrypoint: `launch.py [--dry-run] [--help] [vllm serve options...]`.

Reads the marker, the VL_* knobs and the host's GPUs, decides, then starts `vllm serve`.
With the keep-alive bridge (VL_BRIDGE=keepalive, the default) it runs vLLM on an internal
port and the bridge on the exposed one, and ends with vLLM (supervise.py); with VL_BRIDGE=off
it replaces itself with vLLM (os.execvpe: under tini, signals reach vLLM directly).
`--dry-run` prints the plan as one JSON object and exits 0; `--help` prints the knobs and exit codes.
"""

from __future__ import annotations

import os
import sys

import dataclasses
import errno
import json
import socket
from dataclasses import dataclass

from .access import bridge_environment, decide_access, vllm_environment, without_bridge_secrets, without_keys
from .catalogue import ModelSpec, load_catalogue, resolve_model
from .cachestart import start_of_vllm
from .compilecache import with_compile_cache
from .modelinfos import copy_modelinfos
from .cmdline import ContainerArgs
from .decide import Plan, build_plan
from .report import EXIT_BUG, EXIT_HOST, LaunchError
from .knobs import check_settings, resolve
from ..limits import raise_open_files
from .loader import make_links
from ..logline import logger
from .marker import read_marker
from .probe import probe_host
from .runstate import Observer
from ..redact import Redactor
from .supervise import supervise
from .swap.sleepmode import Slot, host_ram_gib
from .swap.plan import SwapSet, decide_swap_set
# the help, printed before anything is read or probed
from .usage import HELP_FLAGS, help_text

DRY_RUN = "--dry-run"


log = logger("prebake")


def announce(env: dict[str, str]) -> dict[str, str]:
    """The container's first line names the image; its identity, for the status page (empty without a marker:
    make_plan then says why)."""
    try:
        marker = read_marker(env)
    except LaunchError:
        return {}
    log(marker.banner())
    return dict(marker.identity)


@dataclass(frozen=True)
class Launch:
    """What the launcher starts: VL_MODEL's plan and, with VL_SWAP, the set (every model's own plan, VL_MODEL's
    first; the plans hold no set of their own)."""
    plan: Plan
    swap: SwapSet | None = None

    def as_json(self) -> dict:
        """What --dry-run prints: the plan, and the set under "swap"."""
        shown = self.plan.as_json()
        if self.swap:
            shown["swap"] = self.swap.as_json()
        return shown

    def keyless(self) -> Launch:
        """The plan, and every swap model's, without --api-key in vLLM's argv."""
        swap = self.swap and dataclasses.replace(self.swap, models=tuple(
            dataclasses.replace(model, plan=keyless(model.plan)) for model in self.swap.models))
        return Launch(keyless(self.plan), swap)


def make_plan(env: dict[str, str], user_args: list[str] | ContainerArgs) -> Plan:
    """VL_MODEL's plan (the self-test's argv sweep asks it)."""
    return make_launch(env, user_args).plan


def make_launch(env: dict[str, str], user_args: list[str] | ContainerArgs) -> Launch:
    """VL_MODEL's plan; with VL_SWAP, every model's own plan too."""
    args = user_args if isinstance(user_args, ContainerArgs) else ContainerArgs.of(user_args)
    marker = read_marker(env)
    settings = resolve(env, marker.launch_defaults)  # every value checked before anything runs
    check_settings(settings)
    catalogue = load_catalogue()
    model = resolve_model(settings.value("VL_MODEL"), catalogue, settings.source("VL_MODEL"))
    host = probe_host(env)

    def plan_for(spec: ModelSpec, slot: Slot | None = None) -> Plan:
        return build_plan(marker, settings, spec, host, env, args, slot)

    swap = decide_swap_set(settings, model, catalogue, host, plan_for, args,
                           lambda: host_ram_gib(settings.value("VL_MEMINFO"), settings.value("VL_CGROUP")))
    plan = plan_for(model) if swap is None else swap.models[0].plan
    # VL_MODEL's compile cache (a swap set's other models compile theirs on the volume)
    return Launch(with_compile_cache(plan, settings, env, marker.identity, sorted({gpu.name for gpu in host.gpus})),
                  swap)


def keyless(plan: Plan) -> Plan:
    """The plan without --api-key in vLLM's argv."""
    return dataclasses.replace(plan, argv=tuple(without_keys(list(plan.argv))))


def check_port_free(port: int, names: str = "VL_PORT, else VL_PROXY_PORT, or --port among the container arguments") -> None:
    # The script found nginx holding its port only after vLLM died on "Address already in
    # use"; a bind test here names the variable instead. Done only before a real exec: a
    # dry run describes the plan, not the current state of the ports.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as err:
            state = "is already in use" if err.errno == errno.EADDRINUSE else "cannot be bound"
            raise LaunchError(subject=names.split(',')[0], value=str(port),
                              problem=f"port {port} ({names}) {state} ({err.strerror})",
                              fix=f"set {names.split(',')[0]} to a free port (not 3001, 7270, 7861, 8001, 8081, 9091: "
                                  "RunPod's nginx).", exit_code=EXIT_HOST) from None


def _bug(err: Exception) -> str:
    import traceback  # only on this path

    where = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
    return (f"error: launcher bug, not a problem with your settings ({type(err).__name__}: {err}{at}). "
            "Please report it with this line and your VL_* variables; the image's vLLM was not started.")


def main(argv: list[str], environ: dict[str, str] | None = None) -> int:
    if any(arg in HELP_FLAGS for arg in argv):  # before the marker and the GPUs: help works anywhere
        print(help_text())
        return 0
    dry_run = DRY_RUN in argv
    args = ContainerArgs.of([arg for arg in argv if arg != DRY_RUN])  # read once: every decision asks it
    env = dict(os.environ if environ is None else environ)
    identity = {} if dry_run else announce(env)
    try:
        launch = make_launch(env, args)
        plan, swap = launch.plan, launch.swap
        access = decide_access(env, args, bridged=bool(plan.bridge and plan.bridge.mode == "keepalive"))
        # Every argv and decision printed goes through this one redactor (redact.py); the key may come
        # from --api-key, not the environment: bridge_environment() puts it where the redactor reads it.
        redact = Redactor(bridge_environment(env, access))
        if access.source == "VLLM_API_KEY":
            env["VLLM_API_KEY"] = access.key  # without the whitespace around it, for vLLM too (VL_BRIDGE=off)
        if dry_run:
            shown = launch.as_json()
            shown["argv"] = redact.argv(shown["argv"])
            for model in (shown.get("swap") or {}).get("models", []):
                model["argv"] = redact.argv(model["argv"])
            shown["decisions"] = [{key: redact(value) if isinstance(value, str) else value
                                   for key, value in decision.items()} for decision in shown.get("decisions", [])]
            print(json.dumps(shown, indent=1))
            return 0
        bridge = plan.bridge
        if bridge and bridge.mode == "keepalive":
            check_port_free(bridge.port, f"{bridge.port_source}, the keep-alive bridge's port")
            check_port_free(bridge.vllm_port, "VL_INTERNAL_PORT, or --port among the container arguments")
            for other in (swap.models[1:] if swap and swap.sleep_level else ()):
                check_port_free(other.plan.bridge.vllm_port,
                                f"VL_INTERNAL_PORT, + {other.plan.bridge.vllm_port - bridge.vllm_port} for {other.name} "
                                "of VL_SWAP (each model's vLLM has its own port with sleep mode)")
        else:
            check_port_free(bridge.vllm_port)  # VL_BRIDGE=off: vLLM's own port, the container's --port if given
    except LaunchError as err:
        log(f"error: {err}")
        return err.exit_code
    except Exception as err:  # noqa: BLE001 - one line instead of a traceback in a pod's log
        log(_bug(err))
        return EXIT_BUG
    raise_open_files()  # vLLM and the bridge inherit it: Docker's soft 1024 is soon used up by connections
    for decision in plan.decisions:
        log(redact(f"{decision.topic}: {decision.decision} ({decision.why})"))
    log(access.describe())
    keepalive = bool(bridge and bridge.mode == "keepalive")
    if plan.compile_cache and not keepalive:  # before vLLM reads its cache folder; a failure is a cold start
        plan = start_of_vllm(plan, env, lambda text: log(redact(text)), sys.executable)
    if bridge and bridge.mode == "keepalive":
        launch = Launch(plan, swap).keyless()  # the bridge checks the key (Bearer and x-api-key); vLLM gets none
        plan, swap = launch.plan, launch.swap
    swap_plans = {model.name: model.plan for model in swap.models} if swap else {}
    try:
        for each in [plan, *swap_plans.values()]:
            make_links(each.links)
    except OSError as err:
        log(f"error: cannot create {err.filename}: {err.strerror}. Set TMPDIR to a writable folder.")
        return EXIT_HOST
    copy_failed = copy_modelinfos({target: baked for each in [plan, *swap_plans.values()]
                                   for target, baked in each.copies.items()})
    if copy_failed:
        log(copy_failed)
    for name, other in list(swap_plans.items())[1:]:
        when = "once VL_MODEL's answers, then sleeps" if swap.sleep_level else "on demand"
        log(f"swap: {name} starts {when}: {' '.join(redact.argv(other.argv))}")
    if bridge and bridge.mode == "keepalive":
        bridge_env = bridge_environment(env, access)
        observer = Observer(plan.observe, bridge_env, log) if plan.observe else None
        shown = redact.argv(plan.argv)
        log(f"start {' '.join(shown)}, and the keep-alive bridge on port {bridge.port}")
        if observer:
            observer.begin(identity, [d.as_json() for d in plan.decisions], list(plan.argv))
        to_vllm = (lambda each: observer.vllm_env(vllm_environment(each))) if observer else vllm_environment
        envs = {name: to_vllm(each.environment(env)) for name, each in swap_plans.items()}
        # with the bridge, the compile cache is restored once it listens (its page and held requests cover it)
        restore = (lambda stopped: start_of_vllm(plan, env, lambda text: log(redact(text)), sys.executable, stopped)) \
            if plan.compile_cache else None
        return supervise(list(plan.argv), to_vllm(plan.environment(env)), bridge,
                         observer.bridge_env(bridge_env) if observer else bridge_env, log, swap, envs, observer,
                         redact=redact, before_vllm=restore)
    log("exec " + " ".join(redact.argv(plan.argv)))
    sys.stdout.flush()
    try:
        os.execvpe(plan.argv[0], list(plan.argv), without_bridge_secrets(plan.environment(env)))
    except OSError as err:
        log(f"error: cannot exec {plan.argv[0]!r}: {err}. The image's vLLM should be /opt/venv/bin/vllm, "
            "first on PATH.")
        return EXIT_HOST
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
