"""vLLM's run as the launcher records it for the status page: its output captured in vllm.log, its starts and exits
in state.json (contract.py: the file and its reader). One writer, replaced atomically.

The launcher writes `state.json` in the run folder before it starts vLLM (the image, its decisions,
vLLM's command, observeplan.py's plan) and the supervisor updates it as vLLM starts and exits.

supervise.py calls three hooks: `popen_kwargs()` where it starts vLLM, `started(process)` right
after, `exited(code, why)` when vLLM is gone; again for each vLLM it starts. The launcher calls
`begin()` once before that. A swap calls `swapping(model)` before it stops vLLM and
`swapping(None)` once the new one serves: meanwhile the page says "swapping" and the watchdog waits.
"""

from __future__ import annotations

import subprocess
import time
from typing import Callable, Mapping

from ..redact import Redactor
from ..contract import RUN_DIR_VARIABLE, Observe, previous_run, read_state, write_state
from ..untrusted import set_aside_files
from ..vllmlog import LogFile, capture

DRAIN_S = 2.0  # vLLM's workers may keep its pipes open a moment after it exits


class Observer:
    def __init__(self, observe: Observe, environ: Mapping[str, str], log: Callable[[str], None]) -> None:
        self.observe, self.log = observe, log
        self.redact = Redactor(environ)
        self.logfile: LogFile | None = None
        self.threads = []

    def begin(self, identity: Mapping[str, str], decisions: list[dict], argv: list[str]) -> None:
        try:
            write_start(self.observe, identity, decisions, argv, self.redact)
        except OSError as err:
            self.log(f"warning: cannot write {self.observe.state_file} ({err.strerror or err}): the status page "
                     "shows no decisions; set VL_CACHE_ROOT to a writable folder")
        self.logfile = LogFile(self.observe.log_file, self.log)

    @staticmethod
    def vllm_env(environ: Mapping[str, str]) -> dict[str, str]:
        # On a pipe, Python buffers stdout by blocks: a print() in vLLM's processes would reach the log late.
        return {"PYTHONUNBUFFERED": "1", **environ}

    def bridge_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        return {**environ, RUN_DIR_VARIABLE: self.observe.run_dir}

    @staticmethod
    def popen_kwargs() -> dict:
        return {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}

    def started(self, process: subprocess.Popen) -> None:
        self.threads = capture(process.stdout, process.stderr, self.logfile, self.redact)
        # the argv of the vLLM that runs now (a swap starts another model's)
        update_vllm(self.observe.state_file, pid=process.pid, argv=self.redact.argv(list(process.args)))

    def swapping(self, model: str | None) -> None:
        mark_swapping(self.observe.state_file, model)

    def exited(self, code: int, why: str) -> None:
        deadline = time.monotonic() + DRAIN_S
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        # The log file stays open: a vLLM started again in this container (a swap) writes on in it.
        update_vllm(self.observe.state_file, pid=None, exit={"code": code, "at": time.time(), "why": why})


def write_start(observe: Observe, identity: Mapping[str, str], decisions: list[dict], argv: list[str],
                redact: Redactor) -> None:
    """The launcher's part, before vLLM starts (OSError: the caller reports it and serves without a status file).
    state.json is on the volume and copied into the journal: redacted as it is written."""
    decisions = [{key: redact(value) if isinstance(value, str) else value for key, value in d.items()}
                 for d in decisions]
    previous = previous_run(read_state(observe.state_file))
    write_state(observe.state_file, {
        "identity": dict(identity), "decisions": decisions, "argv": redact.argv(argv), "started_at": time.time(),
        "observe": observe.as_json(), "previous_run": previous,
        "vllm": {"starts": [], "pid": None, "exit": None}, "swapping": None,
        "set_aside": set_aside_files()})  # the volume's files this start did not use (untrusted.py): status page


def update_vllm(path: str, argv: list[str] | None = None, **changes) -> None:
    """The supervisor's part: pid and start time on each start, {code, at, why} on exit; the argv (redacted)
    of the vLLM it started, which a swap changes. Never raises."""
    try:
        state = read_state(path)
        if argv is not None:
            state["argv"] = argv
        vllm = state.setdefault("vllm", {"starts": [], "pid": None, "exit": None})
        if "pid" in changes:
            vllm["starts"] = [*vllm.get("starts", []), time.time()]
            vllm["exit"] = None
        vllm.update(changes)
        write_state(path, state)
    except OSError:
        pass


def mark_swapping(path: str, model: str | None) -> None:
    """While another model starts in this one's place: phase "swapping", the watchdog disarmed. Never raises."""
    try:
        state = read_state(path)
        state["swapping"] = model
        write_state(path, state)
    except OSError:
        pass
