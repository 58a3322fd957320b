"""nvcc: the baked nvcc compiles a curand + cuda_fp8.h + CCCL kernel for the variant's arch."""

import os
import subprocess
import tempfile

from ..common import STACK
from ..cuda_toolkit import cuda_home

NAME = "nvcc"
LEVEL = STACK
NEEDS_CUDA_TOOLCHAIN = True

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


def check(spec):
    home = cuda_home()
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
