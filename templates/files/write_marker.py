"""Write the marker /opt/.image_prebaked at build time (runs inside the image, stdlib only).

Versions are read from what is really installed, not from what the variant asked for;
the self-test compares the two.
"""

import argparse
import json
import os
import platform
import sys
from importlib import metadata


def installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--variant", required=True)
    parser.add_argument("--cuda", required=True)
    parser.add_argument("--cuda-arch", required=True)
    parser.add_argument("--cuda-compat-dir", default="")
    parser.add_argument("--launch-defaults", default="{}")
    args = parser.parse_args()
    compat_dir = args.cuda_compat_dir or None
    if compat_dir and not os.path.isdir(compat_dir):
        print(f"write_marker: {compat_dir} is missing although the variant bakes it", file=sys.stderr)
        return 1
    marker = {
        "schema": 1,
        "variant": args.variant,
        "vllm": installed("vllm"),
        "torch": installed("torch"),
        "cuda": args.cuda,
        "python": platform.python_version(),
        "base_image": os.environ["PREBAKE_BASE_IMAGE"],
        "stack_image": os.environ["PREBAKE_STACK_IMAGE"],
        "revision": os.environ["PREBAKE_REVISION"],
        "created": os.environ["PREBAKE_CREATED"],
        "cuda_arch": args.cuda_arch,
        "cuda_compat_dir": compat_dir,
        "launch_defaults": json.loads(args.launch_defaults),
    }
    with open(args.path, "w", encoding="utf-8") as f:
        json.dump(marker, f, indent=2, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
