"""flashinfer-aot: the image carries exactly the FlashInfer modules its variant lists, compiled for its
architecture, and each loads through FlashInfer's own lookup with the JIT off."""

import json
import os
import subprocess
import sys
import tempfile

from ..common import STACK, Skipped

NAME = "flashinfer-aot"
LEVEL = STACK
PREBAKE_DIR = "/opt/prebake"  # the image's folder of prebake's files: its flashinfer_aot.py, on the probe's path

# Run in a fresh interpreter: FlashInfer reads its workspace and JIT switch at import. Prints what is in
# FlashInfer's AOT folder, each listed module's size once loaded, and the architectures its build recorded.
PROBE = r"""
import json, sys
from pathlib import Path
from flashinfer.jit import env as jit_env
aot = Path(jit_env.FLASHINFER_AOT_DIR)
present = sorted(p.name for p in aot.iterdir() if p.is_dir()) if aot.is_dir() else []
loaded, archs = {}, {}
if sys.argv[1:]:
    from flashinfer_aot import module_specs  # the image's own /opt/prebake/flashinfer_aot.py (PYTHONPATH)
for name in sys.argv[1:]:
    for spec in module_specs(name):
        if not spec.is_aot:
            raise SystemExit(f"{spec.name}: FlashInfer does not find {spec.aot_path}")
        spec.build_and_load()  # FLASHINFER_DISABLE_JIT=1: loads the prebuilt file or raises
        if spec.jit_library_path.exists():
            raise SystemExit(f"{spec.name}: compiled into {spec.jit_library_path} instead of loaded")
        loaded[spec.name] = spec.aot_path.stat().st_size
    report = Path("/opt/prebake/flashinfer-aot") / f"{name}.json"
    archs[name] = json.loads(report.read_text())["archs"] if report.is_file() else None
print(json.dumps({"aot_dir": str(aot), "present": present, "loaded": loaded, "archs": archs}))
"""


def _verdict(spec, found):
    names, arch = spec.get("flashinfer_aot") or [], spec["cuda_arch"]
    source = spec.get("flashinfer_aot_source", "the variant's flashinfer_aot")
    foreign = [name for name in found["present"] if name not in found["loaded"]]
    if foreign:
        return False, (f"{found['aot_dir']} holds FlashInfer modules this variant does not list ({source}: "
                       f"{', '.join(names) or 'none'}): {', '.join(foreign)}; another variant's kernels are in its "
                       "stack or kernels image")
    # None: no build report (a module not built by flashinfer_aot.py), whose architectures nothing records
    other_archs = {name: archs for name, archs in found["archs"].items() if archs not in (arch, None)}
    if other_archs:
        return False, ("modules compiled for other architectures than the variant's " + arch + ": "
                       + ", ".join(f"{name} ({archs})" for name, archs in other_archs.items()))
    if not names:
        return True, (f"carries no FlashInfer module, as {source} says (none in {found['aot_dir']}): nothing "
                      "prebuilt for this GPU")
    return True, (f"loaded without nvcc, compiled for {arch} only: "
                  + ", ".join(f"{name} ({size / 1e6:.1f} MB)" for name, size in found["loaded"].items()))


def check(spec):
    names = spec.get("flashinfer_aot") or []
    if "flashinfer-python" not in spec.get("pins", {}):
        if names:
            return False, (f"the variant lists FlashInfer modules ({', '.join(names)}) but its lock has no "
                           "flashinfer-python")
        raise Skipped("no flashinfer-python in the lock, and the variant lists no FlashInfer module")
    with tempfile.TemporaryDirectory() as workspace:
        env = dict(os.environ, FLASHINFER_DISABLE_JIT="1", FLASHINFER_WORKSPACE_BASE=workspace,
                   FLASHINFER_CUDA_ARCH_LIST=spec["cuda_arch"],
                   PYTHONPATH=os.pathsep.join([PREBAKE_DIR, *filter(None, [os.environ.get("PYTHONPATH")])]))
        result = subprocess.run([sys.executable, "-c", PROBE, *names], env=env, capture_output=True, text=True,
                                timeout=300)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, f"a prebuilt FlashInfer module would compile on the pod: {last[0][-600:]}"
    return _verdict(spec, json.loads(result.stdout.strip().splitlines()[-1]))
