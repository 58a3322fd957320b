"""Every catalogue entry's scaled config and its real flags, validated by vLLM 0.27.1's own config classes on the CPU
(issue 49), in ONE `docker run` of the built image.

    python3 benchmarks/gpu/catalogue_cpu.py [--image IMAGE] [--json OUT.json] [KEY...]

For each entry: the REAL launcher's plan (`launch.py --dry-run`, fake nvidia-smi of an H200 host and a hopper
marker: the flags a user of the hopper image gets), the scaled config of benchmarks/gpu/catalogue.toml written as
a model folder, and, in the image, vLLM's `vllm serve` parser, EngineArgs.create_engine_config() on a CUDA
platform answering for the H200 (capability 9.0; vLLM reads no GPU for its config), the architecture's class from
vLLM's registry and the quantization scheme vLLM picks for each target on sm_90. An entry the launcher refuses on
Hopper (qwen38nvfp4) is planned on an RTX PRO 6000 Blackwell host instead and validated as sm_120, the refusal is
a line of its own, and the same flags are tried as sm_90 (KEY@h200) to say which kernel vLLM itself would pick there. One line per entry; exit 1 when any fails. Needs the Qwen3 tokenizer.json (TOKENIZER_JSON,
default ../shared/gpu-bench/tokenizer.json beside the checkout, as fetch.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

from benchmarks.gpu.catalogue_configs import load, write_model  # noqa: E402
from prebake_testing.hosts import Launcher, write_marker  # noqa: E402

IMAGE = "prebake-offline:a40"
# The GPU harness's hopper marker (harness.HOPPER_MARKER): what the hopper image bakes.
HOPPER = {"variant": "hopper", "cuda_arch": "9.0", "launch_defaults": {"VL_MODEL": "ornith", "VL_FLASHINFER": "off"}}
BLACKWELL = {"variant": "blackwell", "cuda_arch": "12.0", "launch_defaults": {"VL_MODEL": "nemotron"}}
HOSTS = {"h200_580": ((9, 0), "NVIDIA H200", 143771, HOPPER),
         "rtxpro6000_580": ((12, 0), "NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, BLACKWELL)}
TOKENIZER = Path(os.environ.get("TOKENIZER_JSON") or REPO.parent / "shared" / "gpu-bench" / "tokenizer.json")


def launcher_plan(folder: Path, key: str, profile: str) -> tuple[dict | None, str]:
    """(the launcher's --dry-run plan or None, its refusal) for VL_MODEL=key on a fake host."""
    launcher = Launcher(folder / profile / key)
    marker = HOSTS[profile][3]
    write_marker(launcher.marker, None, launch_defaults=marker["launch_defaults"], variant=marker["variant"],
                 cuda_arch=marker["cuda_arch"])
    result = launcher.run(profile, env={"VL_MODEL": key})
    return (result.plan if result.rc == 0 else None), result.stderr.strip()


def jobs_for(keys: list[str], work: Path) -> tuple[list[dict], list[str]]:
    """The child's jobs (paths as the container sees them under /work) and the launcher's refusal lines."""
    table = load()
    tokenizers = work / "tokenizer"
    tokenizers.mkdir(parents=True, exist_ok=True)
    shutil.copy(TOKENIZER, tokenizers / "tokenizer.json")
    shutil.copy(HERE / "tokenizer_config.json", tokenizers / "tokenizer_config.json")
    jobs, refusals = [], []
    for key in keys:
        plan, refusal = launcher_plan(work / "plans", key, "h200_580")
        profile = "h200_580"
        if plan is None:
            refusals.append(f"{key}: the launcher refuses it on the H200: {refusal.splitlines()[-1]}")
            plan, refusal = launcher_plan(work / "plans", key, "rtxpro6000_580")
            profile = "rtxpro6000_580"
            if plan is None:
                refusals.append(f"{key}: the launcher refuses it on a Blackwell host too: {refusal}")
                continue
        write_model(key, work / "models" / key, tokenizers, table)
        # A refused entry is also tried as sm_90 with its Blackwell flags: which kernel vLLM itself would pick there.
        for label, host in ([(key, profile)] + ([(f"{key}@h200", "h200_580")] if profile != "h200_580" else [])):
            capability, gpu, memory, _ = HOSTS[host]
            jobs.append({"key": label, "argv": plan["argv"], "env": plan["env"], "model_dir": f"/work/models/{key}",
                         "tokenizer_dir": f"/work/models/{key}" if "--tokenizer" in plan["argv"] else None,
                         "capability": list(capability), "gpu": gpu, "memory_mib": memory})
    return jobs, refusals


CONTAINER = """
import os, subprocess, sys, tempfile
from prebake.incontainer.stub_libcuda import build_stub_libcuda
stub, note = build_stub_libcuda(tempfile.mkdtemp())
print("[catalogue-cpu] " + note, flush=True)
env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_LOGGING_LEVEL="WARNING")
if stub:
    env["LD_LIBRARY_PATH"] = stub + ":" + env.get("LD_LIBRARY_PATH", "")
sys.exit(subprocess.run([sys.executable, "/repo/benchmarks/gpu/catalogue_cpu_child.py", "/work/jobs.json",
                         "/work/result.json"], env=env).returncode)
"""


def run(keys: list[str], image: str) -> tuple[int, list[str], dict]:
    """(exit code, lines, the child's results) of one validation in one container."""
    work = Path(tempfile.mkdtemp(prefix="catalogue-cpu-"))
    try:
        jobs, lines = jobs_for(keys, work)
        lines = [f"[catalogue-cpu] refused {line}" for line in lines]
        (work / "jobs.json").write_text(json.dumps(jobs, indent=1))
        os.chmod(work, 0o755)
        done = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{REPO}:/repo:ro",
                               "-e", "PYTHONPATH=/repo", "-v", f"{work}:/work", "--entrypoint", "/opt/venv/bin/python",
                               image, "-c", CONTAINER],
                              capture_output=True, text=True, timeout=900)
        lines += [line for line in done.stdout.splitlines() if line.startswith("[catalogue-cpu]")]
        result = json.loads((work / "result.json").read_text()) if (work / "result.json").exists() else {}
        if not result:
            lines.append("[catalogue-cpu] FAIL the container gave no result: " + done.stderr.strip()[-1500:])
        failed = not result or any(r["error"] for r in result["results"]) or len(result["results"]) != len(jobs)
        return (1 if failed else 0), lines, result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default=IMAGE)
    parser.add_argument("--json", type=Path, help="write the child's results here")
    parser.add_argument("keys", nargs="*", help="catalogue keys (default: every entry)")
    args = parser.parse_args(argv)
    table = load()
    unknown = [key for key in args.keys if key not in table["entries"]]
    if unknown:
        parser.error(f"unknown catalogue keys {unknown}: benchmarks/gpu/catalogue.toml has {', '.join(table['entries'])}")
    if not TOKENIZER.is_file():
        parser.error(f"TOKENIZER_JSON={TOKENIZER} is not a file: point it at a Qwen3 tokenizer.json")
    code, lines, result = run(args.keys or list(table["entries"]), args.image)
    print("\n".join(lines), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
