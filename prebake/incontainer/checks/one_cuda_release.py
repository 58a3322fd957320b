"""one-cuda-release: NVRTC, its builtins, libcudart, the headers and nvcc are one CUDA release."""

import ctypes
import glob
import os
import re
import subprocess

from ..common import STACK
from ..cuda_toolkit import cuda_home, nvrtc

NAME = "one-cuda-release"
LEVEL = STACK
NEEDS_CUDA_TOOLCHAIN = True


def _header_release(path, macro):
    with open(path) as f:
        match = re.search(rf"#define\s+{macro}\s+(\d+)", f.read())
    if not match:
        raise RuntimeError(f"{macro} not found in {path}")
    number = int(match[1])
    return f"{number // 1000}.{number % 1000 // 10}"


def check(spec):
    home = cuda_home()
    lib, _ = nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
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
