"""Triton 3.7.1 in the a40 image loads a kernel from a restored compile-cache archive without compiling it.

No GPU is needed: Triton compiles for a named target (GPUTarget) with its own ptxas and looks its cache up the
same way as at a pod's start (compiler.py `compile`). A container with the launcher's TRITON_CACHE_DIR on one
volume (/workspace, as on RunPod) compiles a kernel; the checkout's publisher archives that volume and its
restore unpacks the archive on another volume at another path; Triton, in a new container, finds the kernel
there (its compilation listener says `cache_hit`), and compiles it again for another architecture (its key holds
the target) or from a plain copy whose __grp__ index still names the first volume (the restore's rewrite is what
makes the hit).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from entrypoint.launcher.cachepublish import build_archive, new_folders
from entrypoint.launcher.cacherestore import extract
from entrypoint.launcher.caches import load_caches
from entrypoint.launcher.compilecache import CompileCache

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TRITON_UNDER_ROOT = {c.variable: c.path for c in load_caches()}["TRITON_CACHE_DIR"]  # vllm/torch_compile_cache/triton

# Compiles one kernel for sm_<arch> with TRITON_CACHE_DIR as given; prints whether Triton's cache had it.
PROBE = r"""
import json, sys
import triton, triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

hits = []
knobs.compilation.listener = lambda **seen: hits.append(seen["cache_hit"])
source = ASTSource(add, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                   {"BLOCK": 1024})
kernel = triton.compile(source, target=GPUTarget("cuda", int(sys.argv[1]), 32))
print(json.dumps({"cache_hit": hits, "cubin_bytes": len(kernel.asm["cubin"])}))
"""


def triton_run(client, image: str, arch: int, root: Path, at: str) -> dict:
    """The probe in a new container, `root` mounted at `at` and TRITON_CACHE_DIR where the launcher puts it."""
    probe = root.parent / "probe"  # @triton.jit reads its function's source from a file
    probe.mkdir(exist_ok=True)
    (probe / "probe.py").write_text(PROBE)
    out = client.containers.run(
        image, entrypoint=["/opt/venv/bin/python", "/opt/probe/probe.py", str(arch)], network_disabled=True,
        remove=True, user=f"{os.getuid()}:{os.getgid()}",
        volumes={str(root): {"bind": at, "mode": "rw"}, str(probe): {"bind": "/opt/probe", "mode": "ro"}},
        environment={"TRITON_CACHE_DIR": f"{at}/{TRITON_UNDER_ROOT}", "HOME": "/tmp"})
    return json.loads(out.decode().strip().splitlines()[-1])


def test_triton_loads_a_restored_kernel_without_compiling(client, a40, tmp_path):
    first = tmp_path / "first"  # the publishing pod's volume, /workspace in its container
    first.mkdir()
    since = time.time() - 1
    assert triton_run(client, a40, 86, first, "/workspace")["cache_hit"] == [False]
    cache_root = first / "vllm"
    folders = new_folders(str(cache_root), since)
    assert folders and all(folder.startswith("triton/") for folder in folders)
    archive = tmp_path / "archive.tar.gz"
    key = "0" * 64
    build_archive(CompileCache("me/cc", "dataset", "x.tar.gz", key, {}, str(cache_root), False), folders, str(archive),
                  None)

    second = tmp_path / "second"  # a new pod's volume at another path: the launcher restores, vLLM runs there
    done = extract(str(archive), CompileCache("me/cc", "dataset", "x.tar.gz", key, {}, str(second / "vllm"), False),
                   threading.Event())
    assert done["triton_folders"] == len(folders)
    restored = sorted(p.name for p in (second / TRITON_UNDER_ROOT).rglob("*") if p.is_file())
    assert restored == ["__grp__add.json", "add.cubin", "add.json"]  # no IR: Triton loads without it
    assert triton_run(client, a40, 86, second, str(second))["cache_hit"] == [True]
    compiled = sorted(p.name for p in (second / TRITON_UNDER_ROOT).rglob("*") if p.is_file())
    assert compiled == restored  # Triton wrote nothing: it compiled nothing

    assert triton_run(client, a40, 90, second, str(second))["cache_hit"] == [False]  # another GPU: another key

    copied = tmp_path / "copied"  # the same files copied as they were: the index names the first volume's paths
    shutil.copytree(first / TRITON_UNDER_ROOT, copied / TRITON_UNDER_ROOT,
                    ignore=lambda _, names: [n for n in names if not n.endswith((".json", ".cubin"))
                                             and not os.path.isdir(first / TRITON_UNDER_ROOT / n)])
    assert triton_run(client, a40, 86, copied, str(copied))["cache_hit"] == [False]
