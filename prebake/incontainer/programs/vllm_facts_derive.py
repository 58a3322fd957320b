"""What the entrypoint takes from vLLM, read from the image's own vLLM objects; prints one JSON object.

    python vllm_facts_derive.py

{"facts": ...} is what entrypoint/vllm_facts.json holds (docs/selftest.md, vllm-facts): the choices of
`vllm serve`'s --moe-backend and --linear-backend, the number of values of every option, its short spellings
(-tp) and the options that have a --no- form, from the serve parser vLLM builds; the attention backends its CUDA platform may choose (the union of its priority lists over
MLA or not, every GPU generation and the cases it tells apart), members of AttentionBackendEnum; the paths
register_vllm_dev_api_routers adds to an empty FastAPI app. {"sleep": ...} is what sleep-mode checks: vLLM's
engine arguments have enable_sleep_mode, its GPU worker has reload_weights.
"""

import importlib.util
import json
from importlib import metadata

from vllm_platform import platform_note  # noqa: F401  (sets vLLM's platform first: see there)

from fastapi import FastAPI  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402
from vllm.entrypoints.serve import register_vllm_dev_api_routers  # noqa: E402
from vllm.platforms.cuda import _get_backend_priorities  # noqa: E402
from vllm.platforms.interface import DeviceCapability  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

top = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand().subparser_init(top.add_subparsers(required=False, dest="subparser"))

options, choices, aliases, negatable = {}, {}, {}, []
for action in serve._actions:
    long = [flag[2:] for flag in action.option_strings if flag.startswith("--")]
    if not long or action.dest == "help":
        continue
    nargs = action.nargs if action.nargs is not None else 1
    for name in long:
        if nargs == 0 and name.startswith("no-") and name[3:] in long:
            negatable.append(name[3:])
            continue  # BooleanOptionalAction's --no- form: the launcher reads it under the positive name
        options[name] = nargs
    for flag in action.option_strings:  # -tp, -asc: another spelling of the action's first long name
        if not flag.startswith("--"):
            aliases[flag] = long[0]
    if action.choices is not None:
        choices[action.dest] = sorted(action.choices)

backends = []
for use_mla in (False, True):
    for major in range(7, 13):  # Volta to Blackwell: every branch of the priorities
        for kv_cache_dtype in (None, "auto", "fp8"):
            for num_heads in (None, 16, 128):
                for use_non_causal in (False, True):
                    for backend in _get_backend_priorities(use_mla, DeviceCapability(major, 0), num_heads,
                                                           kv_cache_dtype, use_non_causal):
                        if backend.name not in backends:
                            backends.append(backend.name)

app = FastAPI()
before = len(app.routes)
register_vllm_dev_api_routers(app)
dev = sorted({route.path for route in app.routes[before:]})
# the GPU worker cannot be imported without a GPU: its source says whether reload_weights is there
with open(importlib.util.find_spec("vllm.v1.worker.gpu_worker").origin, encoding="utf-8") as worker:
    reload_weights = "    def reload_weights(" in worker.read()

print(json.dumps({
    "facts": {"vllm": metadata.version("vllm"), "attention_backends": backends,
              "moe_backends": choices["moe_backend"], "linear_backends": choices["linear_backend"],
              "serve_options": dict(sorted(options.items())),
              "serve_aliases": dict(sorted(aliases.items())), "serve_negatable": sorted(negatable),
              "dev_endpoints": dev},
    "sleep": {"sleep_flag": EngineArgs.enable_sleep_mode is False, "reload_weights": reload_weights},
}))
