"""nvrtc: NVRTC compiles a cuda_fp8.h program with the baked headers (v77's failure)."""

import ctypes
import os

from ..common import STACK
from ..cuda_toolkit import cuda_home, nvrtc

NAME = "nvrtc"
LEVEL = STACK
NEEDS_CUDA_TOOLCHAIN = True

PROGRAM = r"""
#include <cuda_fp8.h>
extern "C" __global__ void prebake_nvrtc(float *out) { __nv_fp8_e5m2 v(1.5f); out[0] = float(v); }
"""


def check(spec):
    lib, path = nvrtc()
    program = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(program), PROGRAM.encode(), b"selftest.cu", 0, None, None):
        return False, "nvrtcCreateProgram failed"
    arch = spec["cuda_arch"].replace(".", "")
    options = [f"--include-path={cuda_home()}/include".encode(), f"-arch=compute_{arch}".encode()]
    array = (ctypes.c_char_p * len(options))(*options)
    status = lib.nvrtcCompileProgram(program, len(options), array)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(program, log)
    if status != 0:
        return False, f"NVRTC ({path}) cannot compile cuda_fp8.h: {log.value.decode(errors='replace')[-800:]}"
    return True, f"NVRTC ({os.path.basename(path)}) compiled a cuda_fp8.h program for compute_{arch}"
