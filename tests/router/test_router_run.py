"""The GPU harness's `router` run (benchmarks/gpu/router_run.py), its logic tried here: the real vllm-router in front
of two stand-in vLLMs whose prefix cache counts as vLLM's (prebake_testing/prefix_standin.py). With affinity every
session stays on one server and the hit rate is one server's; round robin splits sessions and loses hits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "harness.py"


def test_the_router_run_measures_affinity_against_round_robin(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "HARNESS_VLLM": f"{sys.executable} -m prebake_testing.prefix_standin",
           "HARNESS_ROUTER_SITE": str(tmp_path / "router-site")}
    done = subprocess.run([sys.executable, str(HARNESS), "router"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads((tmp_path / "gpu-router.json").read_text())
    one, affinity, robin = (figures[k] for k in ("one server", "affinity", "round robin"))
    for result in (one, affinity, robin):
        assert result["ok"] == result["requests"] == 12 * figures["turns_per_session"], result
    assert one["prefix_cache_queries"][1] == 0 and all(affinity["prefix_cache_queries"])  # both servers in use
    assert abs(affinity["hit_rate_pct"] - one["hit_rate_pct"]) < 0.5 < affinity["hit_rate_pct"] - robin["hit_rate_pct"]
    assert figures["affinity_points_below_one_server"] is not None
