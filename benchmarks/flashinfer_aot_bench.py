"""Build cost of the FlashInfer modules an image may prebuild: seconds and bytes per module.

    python3 benchmarks/flashinfer_aot_bench.py [--archs "8.6 8.9 9.0 12.0"] [--timeout 280] MODULE...

Runs templates/files/flashinfer_aot.py (the image's build step) once per module, in a fresh
process, with FLASHINFER_CUDA_ARCH_LIST=--archs; needs flashinfer-python, torch, nvcc and ninja,
no GPU. Prints one JSON line per module (`timed_out` when it ran past --timeout), then a table.
The prebuilt files are left in FlashInfer's AOT folder of the Python that ran it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

AOT_SCRIPT = Path(__file__).resolve().parents[1] / "templates" / "files" / "flashinfer_aot.py"


def build(module: str, archs: str, timeout: int, script: Path, prelude: str) -> dict:
    code = prelude + f"\nimport runpy, sys\nsys.argv = ['flashinfer_aot.py', {module!r}]\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "FLASHINFER_CUDA_ARCH_LIST": archs},
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"module": module, "archs": archs, "timed_out": True, "seconds": timeout}
    seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        return {"module": module, "archs": archs, "rc": done.returncode, "seconds": seconds,
                "error": (done.stderr or done.stdout).strip()[-1500:]}
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {"module": module, "archs": archs, "seconds": seconds, "cpus": os.cpu_count(),
            "bytes": sum(m["bytes"] for m in report["modules"].values())}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--archs", default="8.6 8.9 9.0 12.0")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--aot-script", type=Path, default=AOT_SCRIPT)
    parser.add_argument("--prelude", default="", help="Python run first (e.g. jit_cache_bench.BARE_PACKAGE)")
    options = parser.parse_args()
    results = []
    for module in options.modules:
        results.append(build(module, options.archs, options.timeout, options.aot_script, options.prelude))
        print(json.dumps(results[-1]), flush=True)
    print(f"\n{'module':<26} {'archs':<18} {'seconds':>8} {'MB':>8}")
    for r in results:
        size = f"{r['bytes'] / 1e6:.1f}" if "bytes" in r else ("timeout" if r.get("timed_out") else "error")
        print(f"{r['module']:<26} {r['archs']:<18} {r['seconds']:>8} {size:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
