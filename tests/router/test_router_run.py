"""The GPU harness's `router` run (benchmarks/gpu/router_run.py), its logic tried here as it runs on the device:
nginx copied into a folder by benchmarks/gpu/carry_nginx.sh and started from there with LD_LIBRARY_PATH and the
configuration routerpod/router.py renders, in front of two stand-in vLLMs whose prefix cache counts as vLLM's
(prebake_testing/prefix_standin.py), the sessions sent as /v1/messages. With affinity every session stays on one
server and the hit rate is one server's; round robin splits sessions and loses hits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/nginx").exists() or shutil.which("ldd") is None,
                                reason="nginx is not installed (.ci/run installs it)")


def test_the_router_run_measures_affinity_against_round_robin(tmp_path):
    carried = tmp_path / "nginx"
    done = subprocess.run(["bash", str(GPU / "carry_nginx.sh"), str(carried)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not {p.name for p in carried.iterdir()} & {"libc.so.6", "ld-linux-x86-64.so.2"}
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "HARNESS_VLLM": f"{sys.executable} -m prebake_testing.prefix_standin",
           "HARNESS_NGINX_DIR": str(carried), "PATH": "/usr/bin:/bin"}  # no nginx on PATH: only the carried one
    done = subprocess.run([sys.executable, str(GPU / "harness.py"), "router"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads((out / "gpu-router.json").read_text())
    one, affinity, robin = (figures[k] for k in ("one server", "affinity", "round robin"))
    for result in (one, affinity, robin):
        assert result["ok"] == result["requests"] == 12 * figures["turns_per_session"], result
    assert one["prefix_cache_queries"][1] == 0 and all(affinity["prefix_cache_queries"])  # both servers in use
    assert abs(affinity["hit_rate_pct"] - one["hit_rate_pct"]) < 0.5 < affinity["hit_rate_pct"] - robin["hit_rate_pct"]
    assert figures["affinity_points_below_one_server"] is not None
    assert any(f"nginx from {carried}" in c["check"] for c in figures["checks"])


def test_the_router_run_says_where_nginx_is_missing(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "HARNESS_VLLM": f"{sys.executable} -m prebake_testing.prefix_standin",
           "HARNESS_NGINX_DIR": str(tmp_path / "absent")}
    done = subprocess.run([sys.executable, str(GPU / "harness.py"), "router"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert f"no nginx in {tmp_path / 'absent'} (HARNESS_NGINX_DIR): run benchmarks/gpu/carry_nginx.sh" in done.stdout
