"""vLLM and the keep-alive bridge side by side, under tini, ending together.

- vLLM exits: the bridge is stopped and the container exits with vLLM's code (128+N for signal N).
- The bridge exits on its own: vLLM is stopped and the container exits EXIT_BRIDGE, so a pod never
  looks alive while its exposed port answers nothing (RunPod then restarts it).
- SIGTERM/SIGINT/SIGHUP/SIGQUIT (docker stop reaches us through tini) go to both; SIGUSR1/SIGUSR2 go
  to vLLM. Each child runs in its own session, so a terminal's Ctrl-C reaches vLLM once, from here.
- With VL_SWAP, the bridge may ask (over swap/control.py's Control; swap/orders.py does what it asks) for vLLM to
  be restarted with another model's plan:
  vLLM's exit during that restart is reported to the bridge, which decides; outside a swap it is the
  container's exit, as above. With sleep mode, each model has its own vLLM (the bridge starts each once and
  puts it to sleep); a sleeping one's exit is reported to the bridge, and every one is stopped when the
  container ends.
Each model's vLLM is one record (ModelProcess: its process, its modelstate.ModelState, its starts); the current
one is the model that serves, or is being brought up to. What an exit means follows from the record's state:
awake (serving) ends the container, starting or asleep is reported to the bridge, a stop of ours is expected.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from .bridgeplan import Bridge
from ..redact import Redactor
from ..contract import EXIT_BRIDGE, EXIT_HOST, EXIT_WATCHDOG, bridge_argv, port_number, root_path_of, swap_arguments
from ..modelnames import served_names
from ..modelstate import LIVE, MAY_EXIT, STARTABLE_EVEN_ASLEEP, STOPPABLE, ModelState, StateMachine
from ..swapchannel import Event, Exited, Started
from ..vllmoptions import ServeArgs
from .swap.control import Control, become_subreaper, stop_group
from .swap.orders import SwapOrders

if TYPE_CHECKING:
    from .runstate import Observer
    from .swap.plan import SwapSet

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


S = ModelState


@dataclass
class ModelProcess(StateMachine):
    """One model's vLLM as the launcher keeps it: what it runs, its process once started, its state (moved by
    StateMachine's move and swap_state only)."""
    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    port: int | None = None  # its --port: with sleep mode, each model's own
    process: subprocess.Popen | None = None  # the last one started (its exit code stays once it ended)
    state: ModelState = ModelState.AVAILABLE
    starts: int = 0
    who = "swap (launcher)"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.returncode is not None


def port_of(argv: tuple[str, ...]) -> int | None:
    """vLLM's --port in argv (the last one, in any spelling vLLM reads; contract.port_number's rule), or None."""
    return port_number(ServeArgs.of(argv).value("port"))


def model_records(vllm_argv: list[str], vllm_env: Mapping[str, str], swap: SwapSet | None,
                  envs: Mapping[str, Mapping[str, str]]) -> dict[str, ModelProcess]:
    """A record per model, the first being what vllm_argv runs (the one model without a swap set)."""
    if swap is None:
        name = (served_names(vllm_argv) or ("vllm",))[0]
        return {name: ModelProcess(name, tuple(vllm_argv), vllm_env, port_of(tuple(vllm_argv)))}
    return {m.name: ModelProcess(m.name, tuple(m.plan.argv), envs[m.name], port_of(tuple(m.plan.argv)))
            for m in swap.models}


def supervise(vllm_argv: list[str], vllm_env: Mapping[str, str], bridge: Bridge, bridge_env: Mapping[str, str],
              log: Callable[[str], None], swap: SwapSet | None = None,
              swap_envs: Mapping[str, Mapping[str, str]] | None = None, observer: Observer | None = None,
              redact: Redactor | None = None, before_vllm: Callable[[Callable[[], bool]], None] | None = None) -> int:
    """swap: the models to swap between, the first being vllm_argv's; swap_envs: each one's environment;
    observer (runstate.py): captures vLLM's output and records its starts and exits; redact: what
    every argv printed goes through (redact.py); before_vllm: run once the bridge listens and before vLLM starts
    (the compile cache's restore, compilecache.py), given a callable that says a stop signal came."""
    supervisor = Supervisor(model_records(vllm_argv, vllm_env, swap, swap_envs or {}), bridge, log, observer,
                            redact or Redactor({}), swap)
    for signum in STOPS + TO_VLLM_ONLY:
        signal.signal(signum, supervisor.forward)
    command, bridge_end = bridge_command(bridge, vllm_argv), None
    if swap is not None:
        ours, bridge_end = socket.socketpair()
        supervisor.control = Control(ours)
        supervisor.orders = SwapOrders(supervisor, swap)
        command += swap_arguments(swap.for_bridge(), bridge_end.fileno())
        become_subreaper()

    def start_bridge() -> subprocess.Popen:
        return subprocess.Popen(command, env=dict(bridge_env), start_new_session=True,
                                pass_fds=(bridge_end.fileno(),) if bridge_end else ())

    if before_vllm is not None:
        # The bridge first: its status page and held requests cover the restore too (the port answers from
        # the first second, as RunPod's proxy expects).
        supervisor.relay = start_bridge()
        before_vllm(lambda: bool(supervisor.stopping))
        if supervisor.stopping:
            _end(supervisor.relay, BRIDGE_GRACE_S, log, "the keep-alive bridge")
            return 128 + supervisor.stopping[0]
    try:
        supervisor.start_first(vllm_argv, vllm_env)
    except OSError as err:
        log(f"error: cannot start {vllm_argv[0]!r}: {err}. The image's vLLM should be /opt/venv/bin/vllm, "
            "first on PATH.")
        if supervisor.relay is not None:
            _end(supervisor.relay, BRIDGE_GRACE_S, log, "the keep-alive bridge")
        return EXIT_HOST
    if supervisor.relay is None:
        supervisor.relay = start_bridge()
    if bridge_end:
        bridge_end.close()
    if supervisor.stopping:  # a stop signal arrived while the children were starting
        supervisor.forward(supervisor.stopping[0], None)
    return supervisor.run()


class Supervisor:
    """supervise()'s loop, for a single-model pod and a swap pod alike: every child's exit reaped, vLLM stopped
    one way (stop: its process group, a grace, the survivors), the bridge's exit ending the container.
    With a swap set, the bridge may also ask for another model: vLLM restarted with that model's plan (or, with
    sleep mode, one model's vLLM started again beside the others), its exit while it loads reported to the bridge
    rather than ending the container."""

    def __init__(self, records: dict[str, ModelProcess], bridge: Bridge, log: Callable[[str], None],
                 observer: Observer | None = None, redact: Redactor | None = None,
                 swap: SwapSet | None = None) -> None:
        self.records, self.bridge, self.swap, self.log, self.observer = records, bridge, swap, log, observer
        self.redact = redact or Redactor({})
        self.current = next(iter(records))  # the model that serves, or that a swap brings up
        self.relay: subprocess.Popen | None = None  # the keep-alive bridge
        self.control: Control | None = None
        self.orders: SwapOrders | None = None  # what the bridge asks of a swap set's processes
        self.stopping: list[int] = []  # the stop signals received
        self.exits: dict[int, int] = {}
        # where a vLLM this launcher stopped rests: sleep mode starts it again when wanted, restarts when swapped to
        self.stopped_state = S.DOWN if swap and swap.sleep_level else S.AVAILABLE

    def forward(self, signum, _frame) -> None:
        if signum in STOPS:
            self.stopping.append(signum)
        for record in self.records.values():
            if record.running and (record.name == self.current or signum in STOPS):
                _signal(record.process.pid, signum)
        if self.relay is not None and self.relay.returncode is None and signum in STOPS:
            _signal(self.relay.pid, signum)

    def start_first(self, argv: list[str], env: Mapping[str, str]) -> None:
        """The first model, started with the pod: as without swapping, its exit is the container's from the
        start (the launcher takes it for awake; the bridge says starting until it answers)."""
        record = self.records[self.current]
        record.process = start_vllm(argv, env, self.observer)
        record.starts += 1
        self.expect(record, (S.AVAILABLE,), S.STARTING, "started with the pod")
        self.expect(record, (S.STARTING,), S.AWAKE, "its exit is the container's from its start")

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
            for child in [self.relay, *(record.process for record in self.records.values())]:
                if child is not None and child.pid == pid:
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
                code = self.orders.obey(command)
                if code is not None:
                    return code
            watched = [wake_read] + ([self.control] if self.control and not self.control.closed else [])
            select.select(watched, [], [], 1.0)
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass

    # -- what an exit means ----------------------------------------------------------------------------
    def after_exits(self) -> int | None:
        """The container's exit code once it ends, else None: the bridge's exit ends it; a vLLM's exit ends it
        when that vLLM was awake (or a stop signal came); a loading or sleeping vLLM's exit goes to the bridge."""
        if self.relay.returncode is not None and not self.stopping:
            return self.bridge_exited()
        for record in self.records.values():
            if record.name != self.current and record.exited and record.state in LIVE:
                self.log(f"swap: vLLM for {record.name} exited with {describe(record.process.returncode)}; the bridge "
                         "decides what runs next")
                self.report_exit(record)
        current = self.records[self.current]
        if current.running:
            return None
        if self.stopping or current.state is S.AWAKE:
            return self.vllm_exited(current)
        if current.exited and current.state in LIVE:
            self.log(f"swap: vLLM for {current.name} exited with {describe(current.process.returncode)} before it "
                     "answered; the bridge decides what runs next")
            self.report_exit(current)
        return None

    def report_exit(self, record: ModelProcess) -> None:
        if record.swap_state((S.STARTING,), S.FAILED, "its vLLM exited while loading") is not None:
            # it had been up: started again when wanted
            self.expect(record, MAY_EXIT, S.DOWN, "its vLLM exited")
        self.tell(Exited(record.name, record.state, record.process.returncode))

    def bridge_exited(self) -> int:
        code = self.relay.returncode
        watchdog = code == EXIT_WATCHDOG
        if watchdog:
            watchdog_fired(self.log)
        else:
            self.log(bridge_died(self.bridge, code))
        self.stop(self.records[self.current], VLLM_GRACE_S)
        self.stop_others(VLLM_GRACE_S)
        if watchdog and self.observer:
            self.observer.exited(EXIT_WATCHDOG, "watchdog: vLLM stopped answering /health while serving")
        elif self.observer:
            self.observer.exited(EXIT_BRIDGE, bridge_exit_why(code))
        return EXIT_WATCHDOG if watchdog else EXIT_BRIDGE

    def vllm_exited(self, record: ModelProcess) -> int:
        """The serving vLLM exited (or a stop signal came and it did): the container exits with its code."""
        if record.process is None:  # its start failed (the bridge heard), then a stop signal came
            code = 128 + self.stopping[0]
        else:
            code = exit_code(record.process.returncode)
        which = f"vLLM ({record.name})" if self.swap else "vLLM"
        how = describe(record.process.returncode) if record.process else f"signal {signal.Signals(code - 128).name}"
        self.log(f"{which} exited with {how}; stopping the keep-alive bridge")
        if self.observer:
            self.observer.exited(code, f"{which} exited with {how}")
        self.stop(record, 1.0)  # its group's survivors
        self.stop_others(self.swap.stop_s if self.swap else 1.0)
        self.end_bridge()
        return code

    def end_bridge(self) -> None:
        if self.relay.returncode is None:
            _end(self.relay, BRIDGE_GRACE_S, self.log, "the keep-alive bridge")

    # -- processes ------------------------------------------------------------------------------------
    def stop(self, record: ModelProcess, grace_s: float) -> None:
        """Its process group stopped (stop_group); a vLLM that was running rests in stopped_state."""
        if record.process is None:
            return
        # refused for a record already down or stopped: its group is stopped all the same, its state left
        moving = record.swap_state(STOPPABLE, S.STOPPING) is None
        process = record.process
        stop_group(process.pid, lambda: self.exits.get(process.pid), self.reap, grace_s, self.log)
        if moving:
            self.expect(record, (S.STOPPING,), self.stopped_state, "stopped")

    def stop_others(self, grace_s: float) -> None:
        """The sleeping models' vLLMs (sleep mode), when the container ends."""
        for record in self.records.values():
            if record.name != self.current:
                self.stop(record, grace_s)

    def start_model(self, record: ModelProcess) -> None:
        """Start the record's plan, and tell the bridge (started, or exited when it cannot start)."""
        self.log(f"swap: start {' '.join(self.redact.argv(record.argv))}")
        try:
            process = start_vllm(list(record.argv), record.env, self.observer)
        except OSError as err:
            self.log(f"swap: cannot start {record.argv[0]!r}: {err}")
            self.expect(record, STARTABLE_EVEN_ASLEEP, S.FAILED, "its start failed")
            self.tell(Exited(record.name, record.state, EXIT_HOST))
            return
        record.process = process
        record.starts += 1
        self.expect(record, STARTABLE_EVEN_ASLEEP, S.STARTING, "started")
        self.tell(Started(record.name, record.state, process.pid))

    def expect(self, record: ModelProcess, expected: Iterable[ModelState], new: ModelState, why: str) -> None:
        """Move `record` from one of `expected` to `new`. A refusal (a bug: the bridge and the launcher disagree) is
        logged, and the record keeps its state: what the launcher does next follows the process, not the state."""
        if refusal := record.swap_state(expected, new, why):
            self.log(f"{record.who}: {refusal}; the launcher carries on with {record.name} {record.state}")

    def tell(self, event: Event) -> None:
        """One event to the bridge (its state: the record's as the launcher sees it now)."""
        self.control.send(event)

    def running_count(self) -> int:
        return sum(1 for record in self.records.values() if record.running)
