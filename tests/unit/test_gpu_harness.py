"""The GPU harness runs from a plain checkout, as the GPU machine runs it (nothing of the repository installed, the
image's stack on PYTHONPATH): `python3 benchmarks/gpu/harness.py` from the repository root imports every run module
and lists its one registry of runs."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.gpu.checks import Checks
from prebake.lockfile import pinned_versions
from prebake_testing import REPO

RUNS = ["dense", "dense-v2", "moe", "swap", "swap-l2", "swap-ngram", "start-cache-tiny", "start-cache-8b", "router",
        "peak", "catalogue", "tp2", "dp2", "swap-tp2", "router-2pods", "bench-pair"]


def harness(*args: str) -> subprocess.CompletedProcess:
    """-S: no site-packages, so not this venv's editable install of the repository either: a plain checkout."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-S", "benchmarks/gpu/harness.py", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_harness_lists_its_runs_from_a_plain_checkout():
    done = harness("--list")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == RUNS


def test_an_unknown_run_is_refused_with_every_run_named():
    done = harness("dense", "tp3")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"usage: harness.py RUN [RUN...]; RUN is one of {', '.join(RUNS)} (unknown: ['tp3'])"


def test_each_run_keeps_its_own_checks(capsys):
    first, second = Checks(), Checks()
    assert first("plugin installed", True) is True
    assert second("GPU freed", False, "80 GiB used") is False
    assert first.lines == [{"check": "plugin installed", "ok": True, "detail": ""}]
    assert second.lines == [{"check": "GPU freed", "ok": False, "detail": "80 GiB used"}]
    assert capsys.readouterr().out == "[gpu] ok   plugin installed\n[gpu] FAIL GPU freed: 80 GiB used\n"


DEVICE_ONLY = {"py-spy": "the harness's profiler (PREBAKE_START_PYSPY), not part of the image"}


def test_the_gpu_stack_is_the_images_at_the_locks_versions():
    """The device runs what the image runs: a wheel carried at another version than the lock's (NCCL was 2.32.3
    beside the lock's 2.29.7) measures another stack, and a package only the device has hides what the image lacks."""
    lock = pinned_versions((REPO / "images/locks/cu13-py312.txt").read_text(encoding="utf-8"))
    carried = pinned_versions((REPO / "benchmarks/gpu/wheels.txt").read_text(encoding="utf-8"))
    assert {name: (version, lock.get(name)) for name, version in carried.items()
            if name not in DEVICE_ONLY and lock.get(name) != version} == {}
    # what vLLM 0.27.1 imports only when serving a catalogue model, which the device's own packages do not have:
    # cutlass for Qwen3.5's Gated DeltaNet prefill on sm_90, quack for NemotronH's router GEMM warm-up
    assert {"nvidia-cutlass-dsl", "quack-kernels"} <= carried.keys()
