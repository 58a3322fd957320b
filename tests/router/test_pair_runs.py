"""The GPU harness's two-GPU runs (benchmarks/gpu/pair_runs.py, issue 50), what of them runs without a GPU: their
names on harness.py's command line, the refusal on a host with one GPU (a fake nvidia-smi) before anything is
written, the NCCL settings as the a40 image bakes them and as NCCL's own log reports them, and the router-2pods run
end to end against two stand-in vLLMs (prebake_testing/prefix_standin.py) behind the carried nginx, one server
pinned per GPU and one killed half-way through the replay."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.gpu import pair_runs
from prebake_testing import REPO
from prebake_testing.hosts import make_fake_nvidia_smi

GPU = REPO / "benchmarks" / "gpu"


def test_the_pair_runs_are_harness_runs():
    done = subprocess.run([sys.executable, str(GPU / "harness.py"), "tp3"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert all(name in done.stderr for name in ("tp2", "dp2", "swap-tp2", "router-2pods", "bench-pair"))


def test_the_a40_image_nccl_settings_and_how_nccl_reports_them():
    assert pair_runs.baked_nccl("a40") == {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    assert pair_runs.baked_nccl("hopper") == {}
    log = ("h200:4711:4790 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
           "h200:4711:4790 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
           "h200:4711:4790 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.2<0>\n")
    assert pair_runs.nccl_log_settings(log) == {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    assert pair_runs.nccl_log_settings("NCCL INFO NCCL_P2P_LEVEL set by environment to NVL.") == {"NCCL_P2P_LEVEL": "NVL"}


@pytest.mark.parametrize("run", ["tp2", "dp2", "swap-tp2", "bench-pair"])
def test_one_gpu_is_refused_before_anything_is_started_or_written(tmp_path, monkeypatch, run):
    smi = make_fake_nvidia_smi(tmp_path / "bin", "h200_580")
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(pair_runs, "NCCL_CONF", tmp_path / "nccl.conf")
    harness = SimpleNamespace()  # nothing of the harness is reached before the refusal
    figures = pair_runs.run(harness, run) if run != "bench-pair" else pair_runs.bench_pair(harness)
    assert figures["ok"] is False
    refused = {"check": "two GPUs on this host", "ok": False, "detail": "1 GPU(s): this run needs the nvidia-h200-x2 kind"}
    modes = 3 if run == "bench-pair" else 1  # bench-pair: one pod per mode, each refused
    assert figures["checks"] == [refused] * modes and not (tmp_path / "nccl.conf").exists()


@pytest.mark.skipif(not Path("/usr/sbin/nginx").exists() or shutil.which("ldd") is None,
                    reason="nginx is not installed (.ci/run installs it)")
def test_router_2pods_pins_one_server_per_gpu_and_survives_a_killed_one(tmp_path):
    carried = tmp_path / "nginx"
    done = subprocess.run(["bash", str(GPU / "carry_nginx.sh"), str(carried)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "HARNESS_VLLM": f"{sys.executable} -m prebake_testing.prefix_standin",
           "HARNESS_NGINX_DIR": str(carried), "PAIR_KILL_AFTER_S": "0.3", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(GPU / "harness.py"), "router-2pods"], env=env, capture_output=True,
                          text=True, timeout=600)
    figures = json.loads((out / "gpu-router-2pods.json").read_text())
    report = done.stdout[-3000:] + done.stderr[-2000:]
    assert figures["pinned"] == ["0", "1", "0", "1"], report
    killed = figures["killed"]
    assert 0.3 <= killed["killed_at_s"] < killed["wall_s"], report  # the kill fell inside the replay
    # a stream the killed stand-in had begun is lost (nginx cannot move a response whose headers were sent); every
    # session's later turns are answered by the other server
    assert done.returncode == 0 and killed["most_failed_in_a_session"] <= 1, report
    assert killed["requests"] - killed["ok"] <= 12 and killed["ok"] > killed["requests"] // 2, report
