"""vLLM's registry inspection of every architecture the image bakes, without its model-info cache and with it.

    python3 benchmarks/modelinfo_bench.py [--image prebake-offline:a40] [--runs 1]

For each run, two fresh containers of IMAGE (no network, no GPU) run benchmarks/modelinfo_probe.py: vLLM's
`inspect_model_cls()` for each architecture with VLLM_CACHE_ROOT empty (what a new pod had: the registry's
subprocess, which imports vLLM again) and after the launcher's copy of the baked files. Prints one JSON line per
container, then a table: seconds per architecture (median over runs), and where vLLM's own log says the answer
came from. Then `vllm serve`'s own set-up as far as it goes without a GPU (api_setup_probe.py), without the
copy and with it. Needs Docker and a built image with vLLM (the a40 image here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

from prebake.modelinfos import architectures

HERE = Path(__file__).resolve().parent

PROBE = HERE / "modelinfo_probe.py"
SETUP_PROBE = HERE / "api_setup_probe.py"


def probe(image: str, mode: str, archs: list[str], script: Path = PROBE) -> dict:
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{script}:/probe.py:ro",
                           "-v", f"{HERE.parent / 'prebake'}:/src/prebake:ro",
                           "-e", "PYTHONPATH=/src:/src/prebake/incontainer/programs:/opt/prebake",
                           "--entrypoint", "python", image, "/probe.py", mode, *archs],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"the probe failed in {image}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="prebake-offline:a40")
    parser.add_argument("--runs", type=int, default=1)
    options = parser.parse_args()
    archs = list(architectures())
    results: dict[str, list[dict]] = {"empty": [], "copied": []}
    for _ in range(options.runs):
        for mode in results:
            found = probe(options.image, mode, archs)
            print(json.dumps(found), flush=True)
            results[mode].append(found)

    def cell(mode: str, arch: str) -> str:
        seconds = statistics.median(r["architectures"][arch]["seconds"] for r in results[mode])
        source = "cache" if all(r["architectures"][arch]["from_cache"] for r in results[mode]) else \
            "subprocess" if all(r["architectures"][arch]["subprocess"] for r in results[mode]) else "?"
        return f"{seconds:8.3f} s {source:<10}"

    print(f"\n{options.image}, median of {options.runs} run(s), seconds of vLLM's inspect_model_cls()")
    print(f"{'architecture':<36} {'empty VLLM_CACHE_ROOT':<22} {'after the launcher copy':<22}")
    for arch in archs:
        print(f"{arch:<36} {cell('empty', arch)}   {cell('copied', arch)}")
    for mode in results:
        total = statistics.median(sum(a["seconds"] for a in r["architectures"].values()) for r in results[mode])
        print(f"{'total (' + mode + ')':<36} {total:8.3f} s")
    print(f"launcher's copy of the baked files: {statistics.median(r['copy_s'] for r in results['copied']):.4f} s")

    # `vllm serve`'s own set-up, as far as it goes without a GPU (api_setup_probe.py): its registry inspection
    # of the architecture is the first step of its engine configuration.
    print(f"\n`vllm serve` set-up of an 8B-like Qwen3 in {options.image} until it needs the GPU")
    for mode in ("empty", "copied"):
        found = probe(options.image, mode, [], SETUP_PROBE)
        print(json.dumps(found), flush=True)
        print(f"  {mode:<7} imports {found['imports_s']:6.2f} s, parser {found['parser_s']:5.2f} s, engine config "
              f"{found['engine_config_s']:6.2f} s (stopped at {found['stopped'][:60]})")


if __name__ == "__main__":
    main()
