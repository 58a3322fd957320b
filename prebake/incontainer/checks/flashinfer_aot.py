"""flashinfer-aot: the FlashInfer modules compiled at build load through FlashInfer's own lookup, JIT off."""

import json
import os
import subprocess
import sys
import tempfile

from ..common import STACK, Skipped

NAME = "flashinfer-aot"
LEVEL = STACK

# Run in a fresh interpreter: FlashInfer reads its workspace and JIT switch at import.
PROBE = r"""
import json, sys
sys.path.insert(0, "/opt/prebake")
from flashinfer_aot import module_specs
found = {}
for name in sys.argv[1:]:
    for spec in module_specs(name):
        if not spec.is_aot:
            raise SystemExit(f"{spec.name}: FlashInfer does not find {spec.aot_path}")
        spec.build_and_load()  # FLASHINFER_DISABLE_JIT=1: loads the prebuilt file or raises
        if spec.jit_library_path.exists():
            raise SystemExit(f"{spec.name}: compiled into {spec.jit_library_path} instead of loaded")
        found[spec.name] = spec.aot_path.stat().st_size
print(json.dumps(found))
"""


def check(spec):
    names = spec.get("flashinfer_aot") or []
    if not names:
        raise Skipped("the stack compiles no FlashInfer module (stack.flashinfer_aot)")
    with tempfile.TemporaryDirectory() as workspace:
        # The stack's list, as at build: a module for another variant's GPU (fused_moe_120 on
        # a40's stack) has no JitSpec under the variant's own architecture alone.
        archs = " ".join(spec["flashinfer_aot_archs"])
        env = dict(os.environ, FLASHINFER_DISABLE_JIT="1", FLASHINFER_WORKSPACE_BASE=workspace,
                   FLASHINFER_CUDA_ARCH_LIST=archs)
        result = subprocess.run([sys.executable, "-c", PROBE, *names], env=env, capture_output=True, text=True,
                                timeout=300)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, f"a prebuilt FlashInfer module would compile on the pod: {last[0][-600:]}"
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return True, "loaded without nvcc: " + ", ".join(f"{name} ({size / 1e6:.1f} MB)" for name, size in found.items())
