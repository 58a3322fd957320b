"""vLLM and the keep-alive bridge side by side, under tini, ending together.

- vLLM exits: the bridge is stopped and the container exits with vLLM's code (128+N for signal N).
- The bridge exits on its own: vLLM is stopped and the container exits EXIT_BRIDGE, so a pod never
  looks alive while its exposed port answers nothing (RunPod then restarts it).
- SIGTERM/SIGINT/SIGHUP/SIGQUIT (docker stop reaches us through tini) go to both; SIGUSR1/SIGUSR2 go
  to vLLM. Each child runs in its own session, so a terminal's Ctrl-C reaches vLLM once, from here.
- With VL_SWAP, the bridge may ask (swapctl.Control) for vLLM to be restarted with another model's plan:
  vLLM's exit during that restart is reported to the bridge, which decides; outside a swap it is the
  container's exit, as above. With sleep mode, each model has its own vLLM (the bridge starts each once and
  puts it to sleep): the one serving is `children["vllm"]`, the others `children["vllm:NAME"]`; a sleeping
  one's exit is reported to the bridge, and every one is stopped when the container ends.
Stdlib only, like the rest of the launcher.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Callable, Mapping

from .bridgeplan import Bridge
from ..redact import Redactor
from ..contract import (EVENT_EXITED, EVENT_STARTED, EVENT_STOPPED, EXIT_BRIDGE, EXIT_HOST, EXIT_WATCHDOG, OP_GIVE_UP,
                        OP_SERVING, OP_START, OP_STOP, OP_SWITCH, bridge_argv, root_path_of, swap_arguments)
from ..modelnames import served_names
from .swapctl import Control, become_subreaper, stop_group, wait_for_memory
from .sleepmode import SLEEP_KEEP_GIB
from .swapset import VRAM_FREE_MIB, VRAM_WAIT_S

if TYPE_CHECKING:
    from .runstate import Observer
    from .swapset import SwapSet

STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
TO_VLLM_ONLY = (signal.SIGUSR1, signal.SIGUSR2)
BRIDGE_GRACE_S = 5.0
VLLM_GRACE_S = 30.0  # after a bridge death; `docker stop` has its own grace period and SIGKILL


def bridge_command(bridge: Bridge, vllm_argv: list[str] = ()) -> list[str]:
    """vllm_argv: what vLLM runs, whose served names the bridge keeps (Claude Code's other names are renamed)."""
    return bridge_argv(sys.executable, bridge.port, bridge.upstream, bridge.heartbeat_s, served_names(vllm_argv),
                       root_path=root_path_of(vllm_argv), start_hold_s=bridge.start_hold_s)


def exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


def describe(code: int) -> str:
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def bridge_died(bridge: Bridge, code: int) -> str:
    return (f"error: the keep-alive bridge on port {bridge.port} exited with {describe(code)}: nothing answers "
            "there any more, so vLLM is stopped and the container exits rather than look alive. Its log lines "
            "above say why; VL_BRIDGE=off lets vLLM bind the port itself.")


def bridge_exit_why(code: int) -> str:
    return f"the keep-alive bridge exited with {describe(code)}; vLLM was stopped and the container exited {EXIT_BRIDGE}"


def _signal(pid: int, signum: int, group: bool = False) -> None:
    try:
        os.killpg(pid, signum) if group else os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _end(process: subprocess.Popen, grace: float, log: Callable[[str], None], name: str) -> None:
    """SIGTERM, then SIGKILL to its whole process group (vLLM's workers too) after `grace` seconds."""
    _signal(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        pid, status = os.waitpid(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return
        time.sleep(0.05)
    log(f"{name} still running {grace:g} s after SIGTERM: SIGKILL")
    _signal(process.pid, signal.SIGKILL, group=True)
    _, status = os.waitpid(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)


def start_vllm(argv: list[str], env: Mapping[str, str], observer: Observer | None = None) -> subprocess.Popen:
    # Its own session: its process group is vLLM and every worker it forks, stopped as one.
    process = subprocess.Popen(argv, env=dict(env), start_new_session=True,
                               **(observer.popen_kwargs() if observer else {}))
    if observer:
        observer.started(process)
    return process


def watchdog_fired(log: Callable[[str], None]) -> None:
    log("watchdog: vLLM stopped answering its health check while serving (the bridge's lines above say for how "
        f"long); stopping vLLM, and the container exits {EXIT_WATCHDOG} so that RunPod restarts it")


def supervise(vllm_argv: list[str], vllm_env: Mapping[str, str], bridge: Bridge, bridge_env: Mapping[str, str],
              log: Callable[[str], None], swap: SwapSet | None = None,
              swap_envs: Mapping[str, Mapping[str, str]] | None = None, observer: Observer | None = None,
              redact: Redactor | None = None, before_vllm: Callable[[Callable[[], bool]], None] | None = None) -> int:
    """swap: the models to swap between, the first being vllm_argv's; swap_envs: each one's environment;
    observer (runstate.py): captures vLLM's output and records its starts and exits; redact: what
    every argv printed goes through (redact.py); before_vllm: run once the bridge listens and before vLLM starts
    (the compile cache's restore, compilecache.py), given a callable that says a stop signal came."""
    children: dict[str, subprocess.Popen] = {}
    stopping = []

    def forward(signum, _frame) -> None:
        if signum in STOPS:
            stopping.append(signum)
        for name, child in children.items():
            if child.returncode is None and (name == "vllm" or signum in STOPS):
                _signal(child.pid, signum)

    for signum in STOPS + TO_VLLM_ONLY:
        signal.signal(signum, forward)
    command, control, bridge_end = bridge_command(bridge, vllm_argv), None, None
    if swap is not None:
        ours, bridge_end = socket.socketpair()
        control = Control(ours)
        command += swap_arguments(swap.for_bridge(), bridge_end.fileno())
        become_subreaper()
    if before_vllm is not None:
        # The bridge first: its status page and held requests cover the restore too (the port answers from
        # the first second, as RunPod's proxy expects).
        children["bridge"] = subprocess.Popen(command, env=dict(bridge_env), start_new_session=True,
                                              pass_fds=(bridge_end.fileno(),) if bridge_end else ())
        before_vllm(lambda: bool(stopping))
        if stopping:
            _end(children["bridge"], BRIDGE_GRACE_S, log, "the keep-alive bridge")
            return 128 + stopping[0]
    try:
        children["vllm"] = start_vllm(vllm_argv, vllm_env, observer)
    except OSError as err:
        log(f"error: cannot start {vllm_argv[0]!r}: {err}. The image's vLLM should be /opt/venv/bin/vllm, "
            "first on PATH.")
        if "bridge" in children:
            _end(children["bridge"], BRIDGE_GRACE_S, log, "the keep-alive bridge")
        return EXIT_HOST
    if "bridge" not in children:
        children["bridge"] = subprocess.Popen(command, env=dict(bridge_env), start_new_session=True,
                                              pass_fds=(bridge_end.fileno(),) if bridge_end else ())
    if bridge_end:
        bridge_end.close()
    if stopping:  # a stop signal arrived while the children were starting
        forward(stopping[0], None)
    return Supervisor(children, stopping, bridge, log, observer, redact or Redactor({}), swap, swap_envs or {},
                      control).run()


class Supervisor:
    """supervise()'s loop, for a single-model pod and a swap pod alike: every child's exit reaped, vLLM stopped
    one way (stop_vllm: its process group, a grace, the survivors), the bridge's exit ending the container.
    With a swap set, the bridge may also ask for another model: vLLM restarted with that model's plan, its exit
    during the restart reported to the bridge rather than ending the container."""

    def __init__(self, children: dict[str, subprocess.Popen], stopping: list, bridge: Bridge,
                 log: Callable[[str], None], observer: Observer | None = None, redact: Redactor | None = None,
                 swap: SwapSet | None = None, envs: Mapping[str, Mapping] | None = None,
                 control: Control | None = None) -> None:
        self.children, self.stopping, self.bridge, self.swap = children, stopping, bridge, swap
        self.redact = redact or Redactor({})
        self.envs, self.control, self.log, self.observer = envs or {}, control, log, observer
        self.plans = {model.name: model.plan for model in swap.models} if swap else {}
        self.current = swap.models[0].name if swap else None
        self.serving = True  # the first model's exit ends the container, as without swapping
        self.exits: dict[int, int] = {}
        self.expected: set[int] = set()  # vLLM processes a swap stopped
        self.reported: set[int] = set()  # vLLM processes that exited while loading, reported to the bridge

    def reap(self) -> None:
        """Every ended child: vLLM, the bridge, and the orphans of vLLM's group we became the reaper of."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exits[pid] = os.waitstatus_to_exitcode(status)
            for child in self.children.values():
                if child.pid == pid:
                    child.returncode = self.exits[pid]

    def run(self) -> int:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears it
        signal.set_wakeup_fd(wake_write)
        while True:
            self.reap()
            code = self.after_exits()
            if code is not None:
                return code
            for command in self.control.commands() if self.control else ():
                code = self.obey(command)
                if code is not None:
                    return code
            watched = [wake_read] + ([self.control] if self.control and not self.control.closed else [])
            select.select(watched, [], [], 1.0)
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass

    def after_exits(self) -> int | None:
        vllm, relay = self.children["vllm"], self.children["bridge"]
        if relay.returncode is not None and not self.stopping:
            watchdog = relay.returncode == EXIT_WATCHDOG
            if watchdog:
                watchdog_fired(self.log)
            else:
                self.log(bridge_died(self.bridge, relay.returncode))
            self.stop_vllm(VLLM_GRACE_S)
            self.stop_others(VLLM_GRACE_S)
            if watchdog and self.observer:
                self.observer.exited(EXIT_WATCHDOG, "watchdog: vLLM stopped answering /health while serving")
            elif self.observer:
                self.observer.exited(EXIT_BRIDGE, bridge_exit_why(relay.returncode))
            return EXIT_WATCHDOG if watchdog else EXIT_BRIDGE
        for key, other in list(self.children.items()):
            if key.startswith("vllm:") and other.returncode is not None and other.pid not in self.expected \
                    and other.pid not in self.reported:
                self.reported.add(other.pid)
                self.log(f"swap: vLLM for {key[5:]} exited with {describe(other.returncode)}; the bridge decides "
                         "what runs next")
                self.control.send({"event": EVENT_EXITED, "model": key[5:], "code": other.returncode})
        if vllm.returncode is None:
            return None
        if self.stopping or (self.serving and vllm.pid not in self.expected):
            which = f"vLLM ({self.current})" if self.swap else "vLLM"
            self.log(f"{which} exited with {describe(vllm.returncode)}; stopping the keep-alive bridge")
            if self.observer:
                self.observer.exited(exit_code(vllm.returncode), f"{which} exited with {describe(vllm.returncode)}")
            self.stop_vllm(1.0)  # its group's survivors
            self.stop_others(self.swap.stop_s if self.swap else 1.0)
            if relay.returncode is None:
                _end(relay, BRIDGE_GRACE_S, self.log, "the keep-alive bridge")
            return exit_code(vllm.returncode)
        if vllm.pid in self.expected or vllm.pid in self.reported:
            return None
        self.log(f"swap: vLLM for {self.current} exited with {describe(vllm.returncode)} before it answered; "
                 "the bridge decides what runs next")
        self.reported.add(vllm.pid)
        self.control.send({"event": EVENT_EXITED, "model": self.current, "code": vllm.returncode})
        return None

    def stop_vllm(self, grace_s: float, key: str = "vllm") -> None:
        vllm = self.children[key]
        stop_group(vllm.pid, lambda: self.exits.get(vllm.pid), self.reap, grace_s, self.log)

    def stop_others(self, grace_s: float) -> None:
        """The sleeping models' vLLMs (sleep mode), when the container ends."""
        for key in [key for key in self.children if key.startswith("vllm:")]:
            self.expected.add(self.children[key].pid)
            self.stop_vllm(grace_s, key)

    def key_of(self, model: str) -> str | None:
        """Where `model`'s vLLM is in children: "vllm" when it is the current one, "vllm:NAME" asleep, else None."""
        if model == self.current and "vllm" in self.children:
            return "vllm"
        return f"vllm:{model}" if f"vllm:{model}" in self.children else None

    def obey(self, command: dict) -> int | None:
        model = command.get("model")
        if command.get("op") == OP_SERVING and self.swap and self.swap.sleep_level and model in self.plans \
                and model != self.current:
            self.make_current(model)
        if command.get("op") == OP_SERVING and model == self.current:
            self.serving = True
            if self.observer:
                self.observer.swapping(None)
            self.log(f"swap: {model} answers; its exit is the container's from now on")
            return self.after_exits()
        if command.get("op") == OP_GIVE_UP and model == self.current:
            return self.give_up(str(command.get("why") or f"{model} did not come back after a failed swap"))
        if model not in self.plans or self.stopping:
            return None
        if command.get("op") == OP_SWITCH:
            return self.switch(model)
        if command.get("op") in (OP_START, OP_STOP) and self.swap.sleep_level:
            return self.start_beside(model, start=command["op"] == OP_START)
        return None

    def make_current(self, model: str) -> None:
        """Sleep mode: `model`, awake now, serves; the one that served sleeps (or is gone)."""
        previous = self.children.pop("vllm", None)
        if previous is not None and previous.returncode is None:
            self.children[f"vllm:{self.current}"] = previous
        found = self.children.pop(f"vllm:{model}", None)
        if found is not None:
            self.children["vllm"] = found
        self.current = model

    def start_beside(self, model: str, start: bool) -> int | None:
        """Sleep mode: stop `model`'s vLLM if it runs, then (start) start it again, the others left as they are."""
        began = time.monotonic()
        key = self.key_of(model)
        if self.observer and start:
            self.observer.swapping(model)
        if key is not None:
            self.log(f"swap: stopping vLLM ({model})")
            self.expected.add(self.children[key].pid)
            self.stop_vllm(self.swap.stop_s, key)
            others = sum(1 for k, child in self.children.items() if k.startswith("vllm") and child.returncode is None)
            released, used = wait_for_memory(self.swap.nvidia_smi, self.envs[model],
                                             VRAM_FREE_MIB + int(others * SLEEP_KEEP_GIB * 1024), VRAM_WAIT_S,
                                             lambda: bool(self.stopping))
            self.control.send({"event": EVENT_STOPPED, "model": model, "seconds": round(time.monotonic() - began, 3),
                               "vram_used_mib": used, "vram_released": released})
        elif not start:
            self.control.send({"event": EVENT_STOPPED, "model": model, "seconds": 0.0})
        if not start or self.stopping:
            return None
        if model == self.current:
            self.serving = False  # its exit while it loads is the bridge's to decide
        self.start_model(model, "vllm" if model == self.current else f"vllm:{model}")
        return None

    def start_model(self, model: str, key: str) -> None:
        """Start `model`'s plan as children[key], and tell the bridge (started, or exited when it cannot start)."""
        plan = self.plans[model]
        self.log(f"swap: start {' '.join(self.redact.argv(plan.argv))}")
        try:
            vllm = start_vllm(list(plan.argv), self.envs[model], self.observer)
        except OSError as err:
            self.log(f"swap: cannot start {plan.argv[0]!r}: {err}")
            self.control.send({"event": EVENT_EXITED, "model": model, "code": EXIT_HOST})
            return
        self.children[key] = vllm
        self.control.send({"event": EVENT_STARTED, "model": model, "pid": vllm.pid})

    def give_up(self, why: str) -> int:
        """The previous model did not come back after a failed swap: the container ends, with that vLLM's
        exit code when it exited, else EXIT_WATCHDOG once it is stopped (it never answered /health)."""
        self.serving = True
        if self.observer:
            self.observer.swapping(None)
        self.reap()
        vllm = self.children["vllm"]
        if vllm.returncode is not None and vllm.pid not in self.expected:
            return self.after_exits()  # it exited: the container's exit, with its code
        message = (f"swap: {why} Stopping vLLM ({self.current}); the container exits {EXIT_WATCHDOG} so that "
                   "RunPod restarts it (a larger VL_SWAP_LOAD gives a slow model more time)")
        self.log(message)
        self.stop_vllm(BRIDGE_GRACE_S)
        self.stop_others(BRIDGE_GRACE_S)
        if self.observer:
            self.observer.exited(EXIT_WATCHDOG, message)
        relay = self.children["bridge"]
        if relay.returncode is None:
            _end(relay, BRIDGE_GRACE_S, self.log, "the keep-alive bridge")
        return EXIT_WATCHDOG

    def switch(self, model: str) -> int | None:
        previous, began = self.current, time.monotonic()
        self.serving = False
        if self.observer:
            self.observer.swapping(model)
        self.log(f"swap: {previous} -> {model}: stopping vLLM ({previous})")
        self.expected.add(self.children["vllm"].pid)
        self.stop_vllm(self.swap.stop_s)
        if self.stopping:
            return None  # docker stop during the swap: the loop ends with the bridge's and vLLM's exits
        released, used = wait_for_memory(self.swap.nvidia_smi, self.envs[previous], VRAM_FREE_MIB, VRAM_WAIT_S,
                                         lambda: bool(self.stopping))
        stopped_s = time.monotonic() - began
        shown = "?" if used is None else "/".join(map(str, used))
        self.log(f"swap: vLLM ({previous}) stopped in {stopped_s:.1f} s; GPU memory used {shown} MiB"
                 + ("" if released else f": still at or above {VRAM_FREE_MIB} MiB after {VRAM_WAIT_S:g} s, "
                                        "starting anyway (vLLM may size itself smaller)"))
        self.control.send({"event": EVENT_STOPPED, "model": previous, "seconds": round(stopped_s, 3),
                           "vram_used_mib": used, "vram_released": released})
        if self.stopping:
            return None
        self.current = model
        self.start_model(model, "vllm")
        return None
