"""A stub libcuda.so.1 for the vLLM parser child: the build machine has no GPU driver."""

import ctypes
import glob
import importlib.util
import os
import re
import shutil
import subprocess

STUB_RETURN = 34  # CUDA_ERROR_STUB_LIBRARY, what NVIDIA's own stub libcuda returns
# Driver entry points a CUDA runtime may look up by name besides those the extensions link.
STUB_ALWAYS = ("cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuGetProcAddress", "cuGetProcAddress_v2")


def _needs_libcuda(paths):
    """The shared objects among `paths` whose DT_NEEDED names libcuda.so.1 (one readelf run)."""
    out = subprocess.run(["readelf", "-d", "-W", *paths], capture_output=True, text=True).stdout
    found, current = [], paths[0] if len(paths) == 1 else None
    for line in out.splitlines():
        if line.startswith("File: "):
            current = line[6:].strip()
        elif "(NEEDED)" in line and "[libcuda.so.1]" in line and current:
            found.append(current)
    return sorted(set(found))


def build_stub_libcuda(folder):
    """Compile a libcuda.so.1 exporting every cu* symbol the installed vLLM and torch link against.

    Returns (folder or None, note). A stub rather than a real driver: nothing in it runs while
    vLLM's parser is built, but the dynamic loader refuses vLLM's extensions without the file.
    """
    try:
        ctypes.CDLL("libcuda.so.1")
        return None, "a real libcuda.so.1 is present"
    except OSError:
        pass
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++")
    if not compiler or not shutil.which("readelf") or not shutil.which("nm"):
        return None, "no C compiler or binutils in the image to build a stub libcuda.so.1"
    libs = []
    for package in ("vllm", "torch"):
        origin = importlib.util.find_spec(package).origin  # finds, does not import
        libs += glob.glob(os.path.join(os.path.dirname(origin), "**", "*.so*"), recursive=True)
    needing = _needs_libcuda(libs)
    symbols = set(STUB_ALWAYS)
    if needing:
        out = subprocess.run(["nm", "-D", "--undefined-only", *needing], capture_output=True, text=True).stdout
        symbols |= set(re.findall(r"\bU (cu[A-Z]\w*)", out))
    source = os.path.join(folder, "libcuda_stub.c")
    with open(source, "w") as f:
        f.write("".join(f"int {name}(void) {{ return {STUB_RETURN}; }}\n" for name in sorted(symbols)))
    result = subprocess.run([compiler, "-x", "c", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                             os.path.join(folder, "libcuda.so.1"), source], capture_output=True, text=True)
    if result.returncode != 0:
        return None, f"the stub libcuda.so.1 did not compile: {result.stderr.strip()[-300:]}"
    return folder, f"stub libcuda.so.1 with {len(symbols)} entry points for {len(needing)} libraries"
