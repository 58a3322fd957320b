"""sleep-mode: what the launcher and the bridge take from vLLM for sleep-mode swaps is in the image's vLLM.

With vLLM in the lock: the development endpoints vLLM registers with VLLM_SERVER_DEV_MODE=1 are exactly the
ones the bridge refuses (entrypoint/serving/auth.py INSIDE_ONLY: a new one in a vLLM upgrade would otherwise
be reachable from outside the pod), `vllm serve` takes --enable-sleep-mode, and the GPU worker has the
`reload_weights` a level-2 wake calls through /collective_rpc (docs/swap.md).
"""

import json
import os
import subprocess
import sys
import tempfile

from ..common import VARIANT, Skipped
from ..stub_libcuda import build_stub_libcuda

NAME = "sleep-mode"
LEVEL = VARIANT

PROGRAM = r"""
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
from fastapi import FastAPI
from vllm.entrypoints.serve import register_vllm_dev_api_routers
from vllm.engine.arg_utils import EngineArgs
from entrypoint.serving.auth import INSIDE_ONLY
app = FastAPI()
before = len(app.routes)
register_vllm_dev_api_routers(app)
dev = sorted({route.path for route in app.routes[before:]})
# the GPU worker cannot be imported without a GPU: its source says whether reload_weights is there
with open(importlib.util.find_spec("vllm.v1.worker.gpu_worker").origin, encoding="utf-8") as worker:
    reload_weights = "    def reload_weights(" in worker.read()
print(json.dumps({"dev": dev, "refused": sorted(INSIDE_ONLY),
                  "sleep_flag": EngineArgs.enable_sleep_mode is False, "reload_weights": reload_weights}))
"""


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm")
    root = os.path.dirname(os.path.dirname(spec["bridge"]))  # the folder that holds the entrypoint package
    with tempfile.TemporaryDirectory() as folder:
        stub_dir, stub_note = build_stub_libcuda(folder)
        env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
        if stub_dir:
            env["LD_LIBRARY_PATH"] = stub_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        child = subprocess.run([sys.executable, "-c", PROGRAM, root], env=env, capture_output=True, text=True,
                               timeout=300)
    try:
        found = json.loads(child.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return False, f"the program gave no report ({stub_note}): {child.stderr.strip()[-1200:]}"
    problems = []
    unrefused = sorted(set(found["dev"]) - set(found["refused"]))
    if unrefused:
        problems.append(f"vLLM registers {', '.join(unrefused)} in development mode and the bridge relays them: "
                        "add them to entrypoint/serving/auth.py INSIDE_ONLY")
    if not found["sleep_flag"]:
        problems.append("vLLM's engine arguments have no enable_sleep_mode (--enable-sleep-mode)")
    if not found["reload_weights"]:
        problems.append("vLLM's GPU worker has no reload_weights: level-2 wakes cannot reload weights")
    if problems:
        return False, "; ".join(problems)
    return True, (f"{len(found['dev'])} development endpoints of vLLM, all refused by the bridge; "
                  "--enable-sleep-mode and Worker.reload_weights present")
