"""`-lcuda` for the kernels compiled on the pod, against the libcuda vLLM really loads.

FlashInfer links every module it compiles at run time with `-L$CUDA_HOME/lib64/stubs -lcuda`
(flashinfer/jit/cpp_ext.py). The linker wants the unversioned `libcuda.so`: the CUDA wheels
ship no stubs folder, and the NVIDIA container runtime mounts `libcuda.so.1` and its versioned
file but makes the unversioned link only in some of its modes, so on such a host every module
FlashInfer compiles fails with "ld: cannot find -lcuda". The launcher links `libcuda.so` to the
library the loader will give vLLM (host driver or compat, compat.py) in a folder of its own,
first on LIBRARY_PATH, which gcc and nvcc's host linker search before their default folders.
Triton links with `-l:libcuda.so.1` and needs none of this.
"""

from __future__ import annotations

import os
from typing import Mapping

from .loader import exec_folder
from .report import Decision

LINK_FOLDER = "prebake-link"


def libcuda_for_linking(libcuda: str | None, env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], Decision]:
    """(links to create at exec, environment changes, the decision) for a libcuda.so.1 at `libcuda`."""
    if libcuda is None:
        return {}, {}, Decision("linker", "unchanged", "no libcuda.so.1 in this container (no GPU driver mounted): "
                                                       "nothing for -lcuda to link against")
    folder = exec_folder(env, LINK_FOLDER)
    link = os.path.join(folder, "libcuda.so")
    current = [part for part in env.get("LIBRARY_PATH", "").split(":") if part]
    value = ":".join([folder, *(part for part in current if part != folder)])
    return {link: libcuda}, {"LIBRARY_PATH": value}, Decision(
        "linker", f"-lcuda links against {libcuda}",
        f"{link} -> {libcuda}, first on LIBRARY_PATH (created at exec): FlashInfer links the modules it compiles "
        "on the pod with -lcuda, and the runtime does not always make the unversioned libcuda.so")
