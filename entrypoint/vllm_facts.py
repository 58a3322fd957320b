"""What the launcher and the bridge know of the image's vLLM, read from vllm_facts.json beside this file.

That file is generated from the image's own vLLM (`./build.py vllm-facts --variant a40`: vLLM's serve parser, its
AttentionBackendEnum, its development routers) and every build's self-test checks it against the image's vLLM
(the vllm-facts check, docs/selftest.md), so a vLLM upgrade that changes one of them fails the build instead of
reaching a pod. Standard library only: both processes import it at start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Union

FILE = Path(__file__).with_name("vllm_facts.json")
REGENERATE = "./build.py vllm-facts --variant a40"
Nargs = Union[int, str]  # argparse's: 0 (a switch), 1, or "?", "*", "+"


def _load(path: Path = FILE) -> dict:
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{path} is missing or not JSON ({e}): regenerate it with `{REGENERATE}`") from None
    missing = [key for key in ("vllm", "attention_backends", "moe_backends", "linear_backends", "serve_options",
                               "serve_aliases", "serve_negatable", "dev_endpoints") if key not in facts]
    if missing:
        raise RuntimeError(f"{path} lacks {', '.join(missing)}: regenerate it with `{REGENERATE}`")
    return facts


_FACTS = _load()
VLLM_VERSION: str = _FACTS["vllm"]
# --attention-backend: the members of vLLM's AttentionBackendEnum its CUDA platform may choose
ATTENTION_BACKENDS: tuple[str, ...] = tuple(_FACTS["attention_backends"])
MOE_BACKENDS: tuple[str, ...] = tuple(_FACTS["moe_backends"])  # the choices of `vllm serve --moe-backend`
LINEAR_BACKENDS: tuple[str, ...] = tuple(_FACTS["linear_backends"])  # and of --linear-backend
# Every long option of `vllm serve` (without its dashes; a --no- form under its positive name) -> its nargs
SERVE_OPTIONS: dict[str, Nargs] = dict(_FACTS["serve_options"])
# vLLM's other spellings of an option (-tp, -asc) -> the option's long name
SERVE_ALIASES: dict[str, str] = dict(_FACTS["serve_aliases"])
# The switches that also take a --no- form (argparse's BooleanOptionalAction)
SERVE_NEGATABLE: frozenset[str] = frozenset(_FACTS["serve_negatable"])
# The paths vLLM registers with VLLM_SERVER_DEV_MODE=1 (register_vllm_dev_api_routers)
DEV_ENDPOINTS: frozenset[str] = frozenset(_FACTS["dev_endpoints"])
