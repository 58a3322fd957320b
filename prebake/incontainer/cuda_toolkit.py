"""Where the baked CUDA toolkit is, for the toolchain checks."""

import ctypes
import glob
import os


def cuda_home():
    home = os.environ.get("CUDA_HOME", "")
    if not home or not os.path.isdir(home):
        raise RuntimeError(f"CUDA_HOME={home!r} is not a folder")
    return home


def nvrtc():
    """(NVRTC loaded with ctypes, its path) from $CUDA_HOME/lib."""
    libs = sorted(glob.glob(os.path.join(cuda_home(), "lib", "libnvrtc.so.*")))
    libs = [p for p in libs if "builtins" not in p]
    if not libs:
        raise RuntimeError("no libnvrtc.so.* under $CUDA_HOME/lib")
    return ctypes.CDLL(libs[0]), libs[0]
