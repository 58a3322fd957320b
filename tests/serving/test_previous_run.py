"""How the previous run of a pod ended, on its next status page: a bridge that died is recorded (exit 5 and why,
not `exit: null`), and status.txt says it for people, with UTC times instead of epoch seconds."""

from __future__ import annotations

import os
import re
import signal
import subprocess

from prebake_testing.net import request
from prebake_testing.pods import KEY, Pod


def bridge_pid(pod: Pod) -> int:
    out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pod.process.pid)], capture_output=True,
                         text=True).stdout
    return int(next(line.split()[0] for line in out.splitlines() if "bridge.py" in line))


def test_a_dead_bridge_is_the_next_runs_previous_run(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    pod.wait_phase("starting", timeout=10)
    os.kill(bridge_pid(pod), signal.SIGKILL)
    code, _, _ = pod.finish()
    assert code == 5
    again = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        previous = again.wait_phase("starting", timeout=10)["previous_run"]
        assert previous["exit"]["code"] == 5 and "signal SIGKILL" in previous["exit"]["why"]
        text = request(again.port, "GET", "/prebake/status.txt", headers={"x-api-key": KEY})[2].decode()
        line = next(line for line in text.splitlines() if line.startswith("previous run: "))
        assert re.fullmatch(r"previous run: started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ( \(image revision \S+\))?; "
                            r"exited 5 at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: the keep-alive bridge exited with signal "
                            r"SIGKILL; vLLM was stopped and the container exited 5; its log: vllm\.log\.1", line), line
        assert "{" not in line
    finally:
        again.stop()
