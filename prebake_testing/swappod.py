"""Swapping through the real launcher (tests/swap/, benchmarks/swap_bench.py): stand-in `vllm` processes on
PATH, a fake nvidia-smi whose memory.used follows them, the bridge on a free port.

Each stand-in is steered per served name by FAKE_VLLM_MODELS (JSON): {"qwen": {"start_s": 1.5,
"ignore_term": true, "engine": true, "never_healthy": true, "exit": 3, "mib": 20000}}:
  start_s        seconds before it listens (weights, compile, graph capture)
  ignore_term    SIGTERM changes nothing (the launcher must SIGKILL the group)
  engine         a child that ignores SIGTERM and outlives its parent, holding memory (vLLM's EngineCore)
  never_healthy  never listens
  exit           exits with this code after start_s instead of serving
  exit_on_restart  exits with this code when started again (its first start serves)
  on_restart     settings that replace these when it is started again, e.g. {"never_healthy": true}
  keep_mib       with sleep mode: the GPU memory it keeps asleep (2000); awake, it holds `mib`
  sleep_fails    POST /sleep answers 500
  wake_fails     POST /wake_up answers 500, and the stand-in is broken after it
A wake while another stand-in holds more than its keep_mib (awake) fails as a real one's CUDA OOM does.
Pods swap by restarts unless env sets VL_SWAP_SLEEP (the restart tests' behaviour does not depend on the RAM
of the machine that runs them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .hosts import HOSTS, LAUNCH, Launcher
from .net import free_port, free_ports_from, get, request, wait_for_port

MIB = 20000  # each stand-in's GPU memory; the launcher waits for < 3000 MiB after a stop

FAKE_VLLM = """#!{python}
import json, os, signal, subprocess, sys, time
argv = sys.argv[1:]
name = argv[argv.index("--served-model-name") + 1]
conf = json.loads(os.environ.get("FAKE_VLLM_MODELS") or "{{}}").get(name, {{}})
procs = os.environ["FAKE_NVIDIA_SMI_PROCS"]
def note(text):
    with open(os.environ["FAKE_VLLM_RECORD"], "a") as f:
        f.write(f"{{time.monotonic():.3f}} {{name}} {{os.getpid()}} {{text}}\\n")
def hold(pid):
    with open(os.path.join(procs, str(pid)), "w") as f:
        f.write(str(conf.get("mib", {mib})))
hold(os.getpid())
note("started")
with open(os.environ["FAKE_VLLM_RECORD"]) as f:
    starts = sum(1 for line in f if line.split()[1:2] == [name] and line.rstrip().endswith(" started"))
if starts > 1:
    conf.update(conf.get("on_restart", {{}}))
if "exit_on_restart" in conf and starts > 1:
    note(f"exit {{conf['exit_on_restart']}}")
    sys.exit(conf["exit_on_restart"])
signal.signal(signal.SIGUSR1, lambda *_: note("SIGUSR1"))
if conf.get("ignore_term"):
    signal.signal(signal.SIGTERM, lambda *_: note("SIGTERM ignored"))
else:
    signal.signal(signal.SIGTERM, lambda *_: (note("SIGTERM"), os._exit(0)))
if conf.get("engine"):
    engine = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               "signal.SIG_IGN); time.sleep(3600)"])
    hold(engine.pid)
    note(f"engine {{engine.pid}}")
time.sleep(conf.get("start_s", 0))
if "exit" in conf:
    note(f"exit {{conf['exit']}}")
    sys.exit(conf["exit"])
if conf.get("never_healthy"):
    while True:
        time.sleep(1)
from prebake_testing import standin
keep = conf.get("keep_mib", 2000)  # what a sleeping vLLM keeps on the GPU
def others_awake():
    awake = []
    for pid in os.listdir(procs):
        if pid != str(os.getpid()):
            try:
                os.kill(int(pid), 0)
                with open(os.path.join(procs, pid)) as f:
                    if int(f.read() or 0) > keep:
                        awake.append(pid)
            except (OSError, ValueError):
                pass
    return awake
def on_sleep(level):
    if conf.get("sleep_fails"):
        note("sleep failed")
        return "stand-in: sleep failed"
    with open(os.path.join(procs, str(os.getpid())), "w") as f:
        f.write(str(keep))
    note(f"slept {{level}}")
def on_wake():
    if others_awake():  # a real vLLM runs out of GPU memory, and is broken after it
        note("wake OOM")
        return "CUDA out of memory: another vLLM is awake on this GPU"
    if conf.get("wake_fails"):
        note("wake failed")
        return "stand-in: wake failed"
    hold(os.getpid())
    note("woke")
standin.ON_SLEEP, standin.ON_WAKE = on_sleep, on_wake
sys.exit(standin.main(argv, ignore_sigterm=True))  # the SIGTERM handler above stays
"""


# With vLLM's sleep mode: a host with RAM enough for level 1 whatever this machine has; no cgroup limit
BIG_HOST = {"VL_MEMINFO": str(HOSTS / "meminfo_256g"), "VL_CGROUP": "/nonexistent"}
SLEEP = {"VL_SWAP_SLEEP": "1", **BIG_HOST}


class SwapPod:
    """The launcher started as a pod would be, with VL_SWAP, behind the bridge on a free port."""

    def __init__(self, tmp_path: Path, models: dict, env: dict | None = None, profile: str = "h200_580",
                 args: list[str] = ()) -> None:
        launcher = Launcher(tmp_path)
        bin_dir = tmp_path / "fake-bin"
        bin_dir.mkdir(exist_ok=True)
        script = bin_dir / "vllm"
        script.write_text(FAKE_VLLM.format(python=sys.executable, mib=MIB))
        script.chmod(0o755)
        self.procs = tmp_path / "gpu-procs"
        self.procs.mkdir()
        self.record = tmp_path / "vllm-record.txt"
        self.port = free_port()
        self.internal = free_ports_from(3, besides=(self.port,))  # with sleep mode, one port per model
        self.log_path = tmp_path / "launcher.log"
        full = launcher.base_env(profile)
        full.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_VLLM_RECORD": str(self.record),
                     "FAKE_VLLM_MODELS": json.dumps(models), "FAKE_NVIDIA_SMI_PROCS": str(self.procs),
                     "VL_PORT": str(self.port), "VL_INTERNAL_PORT": str(self.internal), "VL_HEARTBEAT": "0.5",
                     "VL_MODEL": "ornith", "VL_SWAP": "ornith:ornith,qwen:qwen", "VL_SWAP_STOP": "1",
                     "VL_SWAP_SLEEP": "off",
                     **(env or {})})
        self.env = full
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen([sys.executable, str(LAUNCH), *args], env=full, stdout=subprocess.DEVNULL,
                                        stderr=self.log)

    def wait_ready(self, timeout: float = 20) -> SwapPod:
        wait_for_port(self.port, self.process, "the bridge", timeout)
        deadline = time.monotonic() + timeout
        while get(self.port, "/health")[0] != 200:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"the pod never answered /health:\n{self.stderr()}")
            time.sleep(0.1)
        return self

    def lines(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def events(self, name: str | None = None) -> list[str]:
        """'<name> <text>' per line of the stand-ins' record, in order."""
        out = []
        for line in self.lines():
            _, model, _, text = line.split(" ", 3)
            if name is None or model == name:
                out.append(f"{model} {text}")
        return out

    def stderr(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def gpu_used_mib(self) -> int:
        out = subprocess.run([self.env["VL_NVIDIA_SMI"], "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             env=self.env, capture_output=True, text=True).stdout
        return int(out.split()[0])

    def swaps(self) -> int:
        return self.stderr().count("answers; swap ")

    def models(self) -> dict:
        status, _, body = get(self.port, "/v1/models")
        assert status == 200, body
        return {m["id"]: m for m in body["data"]}

    def stop(self, timeout: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the launcher did not stop within {timeout} s:\n{self.stderr()}")
        finally:
            self.log.close()
            self.kill_leftovers()
        return self.process.returncode

    def kill_leftovers(self) -> list[int]:
        """Stand-in processes still alive (there must be none once the pod stopped); killed."""
        alive = []
        for name in os.listdir(self.procs):
            try:
                with open(f"/proc/{name}/stat") as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] in "ZX":
                        continue
                os.kill(int(name), signal.SIGKILL)
                alive.append(int(name))
            except (OSError, IndexError):
                pass
        return alive


CHAT = "/v1/chat/completions"


def chat(pod, model: str, stream: bool = True, headers: dict | None = None) -> tuple[int, bytes]:
    """A chat request for `model` to the pod: its status and raw answer."""
    status, _, raw = request(pod.port, "POST", CHAT, {"model": model, "stream": stream,
                                                       "messages": [{"role": "user", "content": "hi"}]},
                             headers, timeout=60)
    return status, raw


def answered_by(raw: bytes) -> str:
    """The model named in a stand-in's answer (whole JSON, or the first SSE data line)."""
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {"):
            return json.loads(line[6:])["model"]
    text = raw.strip()
    if text.startswith(b"{"):
        data = json.loads(text)
        return data.get("model") or data.get("message", {}).get("model")
    raise AssertionError(raw)


def warm(pod: SwapPod, timeout: float = 30) -> dict:
    """With sleep mode, until every model of the set started once and the first one is awake again: the status
    page's swap block (asked with the pod's key, when it has one)."""
    key = pod.env.get("VLLM_API_KEY")
    deadline = time.monotonic() + timeout
    while True:
        status = get(pod.port, "/prebake/status", {"authorization": f"Bearer {key}"} if key else None)[2]
        swap = status.get("swap") or {}
        if swap.get("models") and swap["models"][swap["loaded"]] == "awake" and not swap.get("target") \
                and all(state.split()[0] in ("asleep", "awake", "failed", "down") for state in swap["models"].values()) \
                and "every model started once" in pod.stderr():
            return swap
        if time.monotonic() > deadline or pod.process.poll() is not None:
            raise AssertionError(f"the swap set never finished starting: {swap}\n{pod.stderr()}")
        time.sleep(0.1)
