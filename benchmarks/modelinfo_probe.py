"""Run INSIDE a built image (its Python): vLLM's registry inspects each architecture, in a fresh process whose
VLLM_CACHE_ROOT is an empty folder (`empty`) or one the launcher's own module has just filled from the baked
cache (`copied`, entrypoint/launcher/modelinfos.py, as at a pod's start). Prints one JSON line: the seconds of
each `inspect_model_cls()` and what vLLM's own debug log says it did (from its cache, or a miss that runs its
subprocess). Used by benchmarks/modelinfo_bench.py and tests/integration/prebuilt/test_modelinfos_in_image.py.

    PYTHONPATH=/opt/prebake python modelinfo_probe.py empty|copied ARCHITECTURE...   (the image's launcher)
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

INSPECT = r"""
import sys, time
began = time.monotonic()
from vllm.model_executor.models.registry import ModelRegistry
print("PROBE imported", time.monotonic() - began, flush=True)
for arch in sys.argv[1:]:
    began = time.monotonic()
    ModelRegistry.models[arch].inspect_model_cls()
    print("PROBE inspected", arch, time.monotonic() - began, flush=True)
"""


def main(mode: str, architectures: list[str]) -> dict:
    root = tempfile.mkdtemp(prefix="vllm-cache-root-")
    result: dict = {"mode": mode, "architectures": {}}
    if mode == "copied":
        from entrypoint.launcher.modelinfos import copy_modelinfos, decide_modelinfos
        began = time.monotonic()
        copies, decision = decide_modelinfos({"VLLM_CACHE_ROOT": root})
        result["copy_failed"] = copy_modelinfos(copies)
        result["copy_s"] = round(time.monotonic() - began, 4)
        result["decision"] = decision.decision
    began = time.monotonic()
    child = subprocess.run([sys.executable, "-c", INSPECT, *architectures], capture_output=True, text=True,
                           env={**os.environ, "VLLM_CACHE_ROOT": root, "VLLM_LOGGING_LEVEL": "DEBUG"})
    result["process_s"] = round(time.monotonic() - began, 2)
    log = child.stdout + child.stderr
    result["rc"] = child.returncode
    if child.returncode:
        result["log_tail"] = log[-3000:]
    result["import_s"] = float(re.search(r"^PROBE imported (\S+)", log, re.M)[1]) if "PROBE imported" in log else None
    for arch in architectures:
        timing = re.search(rf"^PROBE inspected {arch} (\S+)", log, re.M)
        loaded = re.search(rf"Loaded model info for class (\S+)\.{arch} from cache", log)
        missed = re.search(rf"model info for class \S+\.{arch} miss", log)
        result["architectures"][arch] = {"seconds": round(float(timing[1]), 3) if timing else None,
                                         "from_cache": bool(loaded), "subprocess": bool(missed)}
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:])))
