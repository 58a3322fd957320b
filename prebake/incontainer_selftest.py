"""The self-test's checks, run INSIDE a freshly built image (stdlib only, no GPU needed).

`prebake.selftest` sends this file to the image's Python with a JSON spec as its argument and
reads back one JSON report: [{"check": ..., "ok": bool, "detail": ...}, ...].
Each check names a failure the bootstrap script met on a real pod (docs/selftest.md).
"""

import ctypes
import glob
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata

MARKER_KEYS = ("schema", "variant", "cuda", "python", "base_image", "stack_image", "revision", "created",
               "cuda_arch", "cuda_compat_dir", "launch_defaults")

KERNEL = r"""
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <curand_kernel.h>
#include <cuda_fp8.h>
__global__ void prebake_selftest(float *out, cuda::std::uint64_t seed) {
    curandStatePhilox4_32_10_t state;
    curand_init(seed, threadIdx.x, 0, &state);
    __nv_fp8_e4m3 v(curand_uniform(&state));
    out[threadIdx.x] = float(v);
}
"""
NVRTC_PROGRAM = r"""
#include <cuda_fp8.h>
extern "C" __global__ void prebake_nvrtc(float *out) { __nv_fp8_e5m2 v(1.5f); out[0] = float(v); }
"""


def check_marker(spec):
    path = spec["marker"]
    try:
        with open(path, encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError) as e:
        return False, f"{path} is missing or not JSON: {e}"
    missing = [k for k in MARKER_KEYS if k not in marker or marker[k] in ("", "unknown")]
    missing = [k for k in missing if not (k == "cuda_compat_dir" and k in marker)]  # null = not baked
    for name in ("vllm", "torch"):
        if name in spec["pins"] and not marker.get(name):
            missing.append(name)
    if missing:
        return False, f"{path} lacks {', '.join(missing)}"
    if marker["variant"] != spec["variant"]:
        return False, f"{path} says variant {marker['variant']!r}, expected {spec['variant']!r}"
    for name in ("vllm", "torch"):
        if name in spec["pins"] and marker[name] != spec["pins"][name]:
            return False, f"{path} records {name} {marker[name]}, the lock pins {spec['pins'][name]}"
    return True, f"{path}: variant {marker['variant']}, vllm {marker.get('vllm')}, torch {marker.get('torch')}"


def check_pins(spec):
    wrong = []
    for name, pinned in sorted(spec["pins"].items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} is not installed (lock: {pinned})")
            continue
        if installed != pinned:
            wrong.append(f"{name} {installed} installed, lock pins {pinned}")
    if wrong:
        return False, "; ".join(wrong)
    return True, f"{len(spec['pins'])} packages at their locked versions"


def check_imports(spec):
    failed = []
    for module in spec["imports"]:
        try:
            importlib.import_module(module)
        except Exception as e:  # any import-time failure is the finding
            failed.append(f"{module}: {e.__class__.__name__}: {e}")
    if failed:
        return False, "; ".join(failed)
    return True, "imported " + ", ".join(spec["imports"])


def check_dependencies(spec):
    result = subprocess.run(["uv", "pip", "check", "--python", sys.executable], capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0, output.splitlines()[-1] if output else "no output"


def _cuda_home():
    home = os.environ.get("CUDA_HOME", "")
    if not home or not os.path.isdir(home):
        raise RuntimeError(f"CUDA_HOME={home!r} is not a folder")
    return home


def check_nvcc(spec):
    home = _cuda_home()
    arch = spec["cuda_arch"].replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.cu")
        with open(source, "w") as f:
            f.write(KERNEL)
        command = [os.path.join(home, "bin", "nvcc"), f"-arch=sm_{arch}", "-c", source, "-o",
                   os.path.join(tmp, "kernel.o")]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return False, f"nvcc -arch=sm_{arch} failed: {(result.stderr or result.stdout).strip()[-800:]}"
    return True, f"nvcc compiled a curand + cuda_fp8.h + CCCL kernel for sm_{arch}"


def _nvrtc():
    libs = sorted(glob.glob(os.path.join(_cuda_home(), "lib", "libnvrtc.so.*")))
    libs = [p for p in libs if "builtins" not in p]
    if not libs:
        raise RuntimeError("no libnvrtc.so.* under $CUDA_HOME/lib")
    return ctypes.CDLL(libs[0]), libs[0]


def check_nvrtc(spec):
    nvrtc, path = _nvrtc()
    program = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(program), NVRTC_PROGRAM.encode(), b"selftest.cu", 0, None, None):
        return False, "nvrtcCreateProgram failed"
    arch = spec["cuda_arch"].replace(".", "")
    options = [f"--include-path={_cuda_home()}/include".encode(), f"-arch=compute_{arch}".encode()]
    array = (ctypes.c_char_p * len(options))(*options)
    status = nvrtc.nvrtcCompileProgram(program, len(options), array)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    if status != 0:
        return False, f"NVRTC ({path}) cannot compile cuda_fp8.h: {log.value.decode(errors='replace')[-800:]}"
    return True, f"NVRTC ({os.path.basename(path)}) compiled a cuda_fp8.h program for compute_{arch}"


def _header_release(path, macro):
    with open(path) as f:
        match = re.search(rf"#define\s+{macro}\s+(\d+)", f.read())
    if not match:
        raise RuntimeError(f"{macro} not found in {path}")
    number = int(match[1])
    return f"{number // 1000}.{number % 1000 // 10}"


def check_one_release(spec):
    home = _cuda_home()
    nvrtc, path = _nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    releases = {"NVRTC": f"{major.value}.{minor.value}"}
    builtins = glob.glob(os.path.join(home, "lib", "libnvrtc-builtins.so.*.*"))
    if not builtins:
        return False, "libnvrtc-builtins.so is missing (NVRTC: 'failed to open libnvrtc-builtins')"
    releases["NVRTC builtins"] = re.search(r"\.so\.(\d+\.\d+)", builtins[0])[1]
    cudart = ctypes.CDLL(sorted(glob.glob(os.path.join(home, "lib", "libcudart.so.*")))[0])
    version = ctypes.c_int()
    cudart.cudaRuntimeGetVersion(ctypes.byref(version))
    releases["libcudart"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
    releases["headers (cuda_runtime_api.h)"] = _header_release(os.path.join(home, "include", "cuda_runtime_api.h"),
                                                                "CUDART_VERSION")
    nvcc = subprocess.run([os.path.join(home, "bin", "nvcc"), "--version"], capture_output=True, text=True).stdout
    releases["nvcc"] = re.search(r"release (\d+\.\d+)", nvcc)[1]
    summary = ", ".join(f"{k} {v}" for k, v in releases.items())
    if set(releases.values()) != {spec["cuda"]}:
        return False, f"not one CUDA release (the stack's is {spec['cuda']}): {summary}"
    try:
        ctypes.CDLL(os.path.basename(builtins[0]))  # found by the loader, as NVRTC's own dlopen needs
    except OSError as e:
        return False, f"{os.path.basename(builtins[0])} is not on the loader path: {e}"
    return True, summary


CHECKS = {
    "marker": check_marker,
    "pins": check_pins,
    "imports": check_imports,
    "dependencies": check_dependencies,
    "nvcc": check_nvcc,
    "nvrtc": check_nvrtc,
    "one-cuda-release": check_one_release,
}


def main():
    spec = json.loads(sys.argv[1])
    report = []
    for name in spec["checks"]:
        try:
            ok, detail = CHECKS[name](spec)
        except Exception as e:  # a check that crashes has failed, with the reason
            ok, detail = False, f"{e.__class__.__name__}: {e}"
        report.append({"check": name, "ok": ok, "detail": detail})
    print(json.dumps(report))
    return 0 if all(item["ok"] for item in report) else 1


if __name__ == "__main__":
    sys.exit(main())
