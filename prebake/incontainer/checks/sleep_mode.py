"""sleep-mode: what the launcher and the bridge take from vLLM for sleep-mode swaps is in the image's vLLM.

With vLLM in the lock: the development endpoints vLLM registers with VLLM_SERVER_DEV_MODE=1 are all among those
the image's bridge refuses (entrypoint/serving/auth.py INSIDE_ONLY, from entrypoint/vllm_facts.json: a new one in a
vLLM upgrade would otherwise be reachable from outside the pod), `vllm serve` takes --enable-sleep-mode, and the GPU
worker has the `reload_weights` a level-2 wake calls through /collective_rpc (docs/swap.md). vLLM's side comes from
programs/vllm_facts_derive.py (once per self-test, or recorded for the stack); the bridge's from its own module, imported
here by the image's Python without vLLM.
"""

import os

from ..common import VARIANT, Skipped
from ..programs.entrypoint_door import ChildFailed, run_child_json
from ..vllm_facts_probe import facts_outcome

NAME = "sleep-mode"
LEVEL = VARIANT

REFUSED = r"""
import json
print(json.dumps(sorted(door.image_module(ENTRYPOINT, "serving.auth").INSIDE_ONLY)))
"""


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm")
    outcome = facts_outcome(spec)
    try:
        refused = run_child_json(os.path.dirname(spec["bridge"]), REFUSED, "the bridge's auth module", 60)
    except ChildFailed as err:
        return False, str(err)
    dev, found = outcome["facts"]["dev_endpoints"], outcome["sleep"]
    problems = []
    unrefused = sorted(set(dev) - set(refused))
    if unrefused:
        problems.append(f"vLLM registers {', '.join(unrefused)} in development mode and the bridge relays them: "
                        "entrypoint/serving/auth.py INSIDE_ONLY must hold every path of entrypoint/vllm_facts.json "
                        "dev_endpoints (`./build.py vllm-facts` writes them)")
    if not found["sleep_flag"]:
        problems.append("vLLM's engine arguments have no enable_sleep_mode (--enable-sleep-mode)")
    if not found["reload_weights"]:
        problems.append("vLLM's GPU worker has no reload_weights: level-2 wakes cannot reload weights")
    if problems:
        return False, "; ".join(problems)
    return True, (f"{len(dev)} development endpoints of vLLM, all refused by the bridge; "
                  "--enable-sleep-mode and Worker.reload_weights present"
                  + (" (vLLM's side recorded for this stack)" if outcome["recorded"] else ""))
