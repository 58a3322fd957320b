"""marker: /opt/.image_prebaked is complete and names this variant and the lock's vllm and torch."""

import json

from ..common import VARIANT

NAME = "marker"
LEVEL = VARIANT

KEYS = ("schema", "variant", "cuda", "python", "base_image", "stack_image", "revision", "created",
        "cuda_arch", "cuda_compat_dir", "launch_defaults")


def check(spec):
    path = spec["marker"]
    try:
        with open(path, encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError) as e:
        return False, f"{path} is missing or not JSON: {e}"
    missing = [k for k in KEYS if k not in marker or marker[k] in ("", "unknown")]
    missing = [k for k in missing if not (k == "cuda_compat_dir" and k in marker)]  # null = not baked
    for name in ("vllm", "torch"):
        if name in spec["pins"] and not marker.get(name):
            missing.append(name)
    if missing:
        return False, f"{path} lacks {', '.join(missing)}"
    if marker["variant"] != spec["variant"]:
        return False, f"{path} says variant {marker['variant']!r}, expected {spec['variant']!r}"
    for name in ("vllm", "torch"):
        if name in spec["pins"] and marker[name] != spec["pins"][name]:
            return False, f"{path} records {name} {marker[name]}, the lock pins {spec['pins'][name]}"
    return True, f"{path}: variant {marker['variant']}, vllm {marker.get('vllm')}, torch {marker.get('torch')}"
