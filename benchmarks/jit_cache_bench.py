"""First-use cost of what vLLM compiles at start, cold against prebuilt/warm, on a real GPU.

    python3 benchmarks/jit_cache_bench.py [--aot-script templates/files/flashinfer_aot.py] [--out DIR]

Needs a CUDA GPU, torch with Triton, nvcc, and flashinfer-python 0.6.16.post3 importable.
Every measurement runs in a fresh Python process, so nothing is cached in memory:

1. FlashInfer sampling module (vLLM's top-k/top-p sampler): first call with an empty JIT
   cache and no prebuilt module (nvcc compiles it), then after templates/files/flashinfer_aot.py
   has put it in FlashInfer's AOT folder (what the image build does), with a new empty JIT
   cache; then with the prebuilt module removed and FLASHINFER_DISABLE_JIT=1 (must fail).
2. torch.compile of a small function: first call with empty TORCHINDUCTOR_CACHE_DIR and
   TRITON_CACHE_DIR, then again in a new process on the same (now warm) folders.
3. The driver's PTX JIT cache: a kernel shipped as PTX only, run with an empty CUDA_CACHE_PATH,
   then again: files appear in CUDA_CACHE_PATH and the second start is cheaper.
Prints one JSON object per measurement, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A machine that carries flashinfer without all of its optional dependencies (the device machine
# has no registry: nvidia-cutlass-dsl's 88 MB CUDA library is left behind) cannot run its
# package __init__, which imports every kernel family; the sampling module needs none of them.
BARE_PACKAGE = r"""
try:
    import flashinfer
except Exception as err:
    import importlib.util, sys, types
    for name in [n for n in sys.modules if n.startswith("flashinfer")]:
        del sys.modules[name]
    spec = importlib.util.find_spec("flashinfer")
    package = types.ModuleType("flashinfer")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["flashinfer"] = package
    print(f"flashinfer imported without its __init__ ({err!r})", file=sys.stderr)
"""

SAMPLING_CALL = r"""
import json, os, sys, time
t0 = time.monotonic()
import torch
""" + BARE_PACKAGE + r"""
import flashinfer.sampling as fs
from flashinfer.jit.sampling import gen_sampling_module
t1 = time.monotonic()
spec = gen_sampling_module()
prebuilt = spec.is_aot
logits = torch.randn(64, 151936, device="cuda")
top_k = torch.full((64,), 20, device="cuda", dtype=torch.int32)
top_p = torch.full((64,), 0.95, device="cuda")
torch.cuda.synchronize()
t2 = time.monotonic()
ids = fs.top_k_top_p_sampling_from_logits(logits, top_k, top_p)
torch.cuda.synchronize()
t3 = time.monotonic()
ids = fs.top_k_top_p_sampling_from_logits(logits, top_k, top_p)
torch.cuda.synchronize()
t4 = time.monotonic()
assert ids.shape == (64,) and int(ids.max()) < 151936
jit_so = spec.jit_library_path
print(json.dumps({"import_s": round(t1 - t0, 2), "first_call_s": round(t3 - t2, 3),
                  "second_call_s": round(t4 - t3, 4), "prebuilt": prebuilt,
                  "nvcc_output_in_jit_cache": jit_so.exists()}))
"""

COMPILE_CALL = r"""
import json, time
import torch
t0 = time.monotonic()
@torch.compile
def block(x, w, b):
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.nn.functional.gelu(y) * torch.sigmoid(y) + x
x = torch.randn(4096, 4096, device="cuda"); w = torch.randn(4096, device="cuda"); b = torch.randn(4096, device="cuda")
torch.cuda.synchronize()
t1 = time.monotonic()
block(x, w, b); torch.cuda.synchronize()
t2 = time.monotonic()
block(x, w, b); torch.cuda.synchronize()
t3 = time.monotonic()
print(json.dumps({"first_call_s": round(t2 - t1, 2), "second_call_s": round(t3 - t2, 4)}))
"""

PTX_KERNEL = r"""
#include <cstdio>
__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  float *x, *y; cudaMalloc(&x, 4096); cudaMalloc(&y, 4096);
  axpy<<<1, 1024>>>(2.f, x, y, 1024);
  cudaError_t e = cudaDeviceSynchronize(); printf("%s\n", cudaGetErrorString(e)); return e != cudaSuccess;
}
"""


def run_python(code: str, env: dict[str, str]) -> dict:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    wall = round(time.monotonic() - started, 2)
    if done.returncode != 0:
        result = {"rc": done.returncode, "process_s": wall, "error": done.stderr.strip().splitlines()[-1:] or [""]}
    else:
        result = {"process_s": wall, **json.loads(done.stdout.strip().splitlines()[-1])}
    print(json.dumps(result), flush=True)  # as it comes: a run cut short still leaves its figures
    return result


def flashinfer_sampling(aot_script: Path, work: Path) -> list[dict]:
    base = dict(os.environ)
    base.pop("FLASHINFER_CUDA_ARCH_LIST", None)  # run time: the GPU's own architecture
    exec(BARE_PACKAGE, {})
    import flashinfer.jit.env as jit_env  # only for the AOT folder's path

    aot_dir = jit_env.FLASHINFER_AOT_DIR / "sampling"
    shutil.rmtree(aot_dir, ignore_errors=True)
    results = []
    cold = run_python(SAMPLING_CALL, {**base, "FLASHINFER_WORKSPACE_BASE": str(work / "fi-cold")})
    results.append({"what": "flashinfer sampling, no prebuilt module, empty JIT cache", **cold})
    warm = run_python(SAMPLING_CALL, {**base, "FLASHINFER_WORKSPACE_BASE": str(work / "fi-cold")})
    results.append({"what": "flashinfer sampling, no prebuilt module, JIT cache warm (volume)", **warm})
    started = time.monotonic()
    run_aot = (BARE_PACKAGE + "\nimport runpy, sys\nsys.argv = ['flashinfer_aot.py', 'sampling']\n"
               f"runpy.run_path({str(aot_script)!r}, run_name='__main__')\n")
    build = subprocess.run([sys.executable, "-c", run_aot], capture_output=True, text=True,
                           env={**base, "FLASHINFER_CUDA_ARCH_LIST": "9.0"}, timeout=900)
    results.append({"what": "flashinfer_aot.py sampling for 9.0 (image build step)", "rc": build.returncode,
                    "wall_s": round(time.monotonic() - started, 1),
                    "report": build.stdout.strip().splitlines()[-1:] or build.stderr.strip().splitlines()[-3:]})
    pre = run_python(SAMPLING_CALL, {**base, "FLASHINFER_WORKSPACE_BASE": str(work / "fi-prebuilt")})
    results.append({"what": "flashinfer sampling, prebuilt module, empty JIT cache", **pre})
    shutil.rmtree(aot_dir, ignore_errors=True)
    gone = run_python(SAMPLING_CALL, {**base, "FLASHINFER_WORKSPACE_BASE": str(work / "fi-gone"),
                                      "FLASHINFER_DISABLE_JIT": "1"})
    results.append({"what": "flashinfer sampling, prebuilt module removed, FLASHINFER_DISABLE_JIT=1 (must fail)", **gone})
    return results


def inductor(work: Path) -> list[dict]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"), "TRITON_CACHE_DIR": str(work / "triton")}
    cold = run_python(COMPILE_CALL, env)
    warm = run_python(COMPILE_CALL, env)
    triton_only = {**env, "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor-empty")}
    half = run_python(COMPILE_CALL, triton_only)
    return [{"what": "torch.compile, Inductor and Triton caches empty", **cold},
            {"what": "torch.compile, Inductor and Triton caches warm (new process)", **warm},
            {"what": "torch.compile, Inductor cache empty, Triton cache warm", **half}]


def ptx_jit(work: Path) -> list[dict]:
    source = work / "axpy.cu"
    source.write_text(PTX_KERNEL)
    binary = work / "axpy"
    subprocess.run(["nvcc", "-gencode=arch=compute_80,code=compute_80", str(source), "-o", str(binary)], check=True)
    cache = work / "nv-compute"
    results = []
    for label in ("empty", "warm"):
        started = time.monotonic()
        done = subprocess.run([str(binary)], env={**os.environ, "CUDA_CACHE_PATH": str(cache)}, capture_output=True, text=True)
        files = sum(1 for p in cache.rglob("*") if p.is_file()) if cache.exists() else 0
        results.append({"what": f"PTX-only kernel, CUDA_CACHE_PATH {label}", "rc": done.returncode,
                        "wall_s": round(time.monotonic() - started, 3), "files_in_CUDA_CACHE_PATH": files})
    return results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--aot-script", type=Path, default=Path(__file__).resolve().parents[1] / "templates" / "files" / "flashinfer_aot.py")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--prebuilt-so", type=Path,
                        help="only load this prebuilt sampling.so (e.g. the image's, for several archs) and time it")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jit-bench-"))
    if options.prebuilt_so:
        exec(BARE_PACKAGE, {})
        import flashinfer.jit.env as jit_env

        target = jit_env.FLASHINFER_AOT_DIR / "sampling" / "sampling.so"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(options.prebuilt_so, target)
        result = run_python(SAMPLING_CALL, {**os.environ, "FLASHINFER_WORKSPACE_BASE": str(work / "fi"),
                                            "FLASHINFER_DISABLE_JIT": "1"})
        print(json.dumps({"what": f"flashinfer sampling, prebuilt {options.prebuilt_so.name} "
                                  f"({options.prebuilt_so.stat().st_size} bytes), JIT disabled", **result}))
        return 0
    results = flashinfer_sampling(options.aot_script, work) + inductor(work) + ptx_jit(work)
    for item in results:
        print(json.dumps(item))
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "jit_cache_bench.json").write_text(json.dumps(results, indent=1))
    print(f"\n{'measurement':<82} first use")
    for item in results:
        value = item.get("first_call_s", item.get("wall_s", item.get("error")))
        print(f"{item['what']:<82} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
