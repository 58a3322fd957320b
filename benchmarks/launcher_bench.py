#!/usr/bin/env python3
"""Launcher start-up time: process start to the moment it execs vLLM.

Runs the real command line (entrypoint/launch.py, exec path) N times with a fake
nvidia-smi (tests/fixtures/hosts/<profile>.json) or a real one, `vllm` being a link to
/bin/true on PATH, and prints medians. It also times the parts, to say what dominates:
the interpreter's start, the nvidia-smi query, and importing the launcher's modules.

    python3 benchmarks/launcher_bench.py                 # fake H200, 30 runs
    python3 benchmarks/launcher_bench.py --nvidia-smi /usr/bin/nvidia-smi   # a real GPU host
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "entrypoint" / "launch.py"
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
QUERY = ["--query-gpu=index,name,memory.total,driver_version,compute_cap", "--format=csv,noheader,nounits"]
TARGET_MS = 100.0


def median_ms(command: list[str], env: dict[str, str], runs: int) -> float:
    subprocess.run(command, env=env, capture_output=True, check=False)  # warm-up (page cache, bytecode)
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        done = subprocess.run(command, env=env, capture_output=True, check=False)
        times.append((time.perf_counter_ns() - start) / 1e6)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return statistics.median(times)


def fake_cache(hub: Path, repo: str) -> None:
    """A complete one-file snapshot, so that the launcher takes the huggingface_hub path."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0" * 40)
    for name in ("config.json", "model.safetensors"):
        (snapshot / name).write_text("{}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--profile", default="h200_580", help="host profile of tests/fixtures/hosts (fake nvidia-smi)")
    parser.add_argument("--nvidia-smi", help="a real nvidia-smi instead of the fake")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.runs < 20:
        parser.error("--runs must be at least 20")

    python = sys.executable  # a venv interpreter must stay itself (its site-packages hold huggingface_hub)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "bin").mkdir()
        os.symlink(shutil.which("true") or "/bin/true", tmp / "bin" / "vllm")
        if args.nvidia_smi:
            smi = args.nvidia_smi
        else:
            smi = str(tmp / "nvidia-smi")
            Path(smi).write_text(f"#!/bin/sh\nFAKE_NVIDIA_SMI_HOST='{HOSTS / (args.profile + '.json')}' "
                                 f"exec '{python}' -S '{HOSTS / 'fake_nvidia_smi.py'}' \"$@\"\n")
            os.chmod(smi, 0o755)
        marker = tmp / "image_prebaked"
        marker.write_text(json.dumps({"variant": "bench", "cuda_compat_dir": None,
                                      "launch_defaults": {"VL_MODEL": "ornith"}}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VL_", "HF_", "VLLM_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the image keeps the launcher's bytecode
        env.update({"PATH": f"{tmp / 'bin'}:{env.get('PATH', '')}", "HOME": str(tmp), "HF_HOME": str(tmp / "hf"),
                    "VL_PREBAKED_MARKER": str(marker), "VL_NVIDIA_SMI": smi, "VL_PORT": "18199",
                    # the exec path: with the keep-alive bridge the launcher would also start (and, as
                    # /bin/true exits at once, stop) the bridge, which is not the launcher's own start-up
                    "VL_BRIDGE": "off"})

        figures = {
            "launcher, weights not cached (ms)": median_ms([python, str(LAUNCH)], env, args.runs),
            "python start (ms)": median_ms([python, "-c", "pass"], env, args.runs),
            "nvidia-smi query (ms)": median_ms([smi, *QUERY], env, args.runs),
            "python start + launcher imports (ms)": median_ms(  # the checkout's launcher, as LAUNCH runs it
                [python, "-c", "import entrypoint.launcher.main"], {**env, "PYTHONPATH": str(ROOT)}, args.runs),
        }
        fake_cache(tmp / "hf" / "hub", "ulkaa/Ornith-1.5-35B-A3B-AWQ-INT4")
        figures["launcher, weights cached: imports huggingface_hub (ms)"] = median_ms([python, str(LAUNCH)], env, args.runs)

    imports = figures["python start + launcher imports (ms)"] - figures["python start (ms)"]
    parts = {"python start": figures["python start (ms)"], "nvidia-smi query": figures["nvidia-smi query (ms)"],
             "launcher imports": imports}
    main_figure = figures["launcher, weights not cached (ms)"]
    rest = main_figure - sum(parts.values())
    parts["decisions and the rest"] = rest
    dominant = max(parts, key=parts.get)
    if args.json:
        print(json.dumps({"runs": args.runs, "nvidia_smi": args.nvidia_smi or f"fake ({args.profile})",
                          "figures": figures, "parts": parts, "dominant": dominant}, indent=1))
        return 0
    print(f"launcher start-up, process start to exec, median of {args.runs} runs "
          f"({'nvidia-smi ' + args.nvidia_smi if args.nvidia_smi else 'fake nvidia-smi, ' + args.profile}):")
    for name, value in figures.items():
        print(f"  {name:<58} {value:7.1f}")
    print("parts of the first figure:")
    for name, value in parts.items():
        print(f"  {name:<58} {value:7.1f}")
    verdict = "under" if main_figure < TARGET_MS else "OVER"
    print(f"{main_figure:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target; dominated by {dominant}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
