"""What a py-spy profile of vLLM's start says, in numbers: per process, the seconds sampled, in imports, in Triton
compiles, and what its first seconds did (issue 54: a forked engine core must not begin by importing torch again).

    python3 benchmarks/gpu/profile_summary.py pyspy-start-cache-8b-restored.json

The input is py-spy's speedscope output (`py-spy record --format speedscope --rate R --subprocesses`): one sampled
profile per thread, named "Process PID Thread TID ...", samples in time order, each a list of frame indices from the
outermost call to the innermost; `rate` converts samples to seconds.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

IMPORT_FRAME = "_find_and_load"  # importlib's frame under every import that runs a module's code
TRITON_COMPILE = re.compile(r"triton/compiler/compiler\.py$")  # triton.compile(): a kernel built, not loaded


def summarise(speedscope: dict, rate: int = 50, first_s: float = 2.0) -> list[dict]:
    frames = speedscope["shared"]["frames"]
    by_process: dict[str, list[list[int]]] = {}
    for profile in speedscope["profiles"]:
        found = re.match(r"Process (\d+) Thread (\d+)", profile.get("name", ""))
        pid = found.group(1) if found else profile.get("name", "?")
        if (found and found.group(1) == found.group(2)) or pid not in by_process:
            by_process[pid] = profile["samples"]  # the main thread (its id is the process's): where the start runs
    out = []
    for pid, samples in by_process.items():
        def share(of: list[list[int]], test) -> float:
            return round(sum(1 for stack in of if any(test(frames[i]) for i in stack)) / rate, 1)

        head = samples[:int(first_s * rate)]
        modules = Counter(_innermost_import(frames, stack) for stack in head
                          if any(frames[i]["name"] == IMPORT_FRAME for i in stack))
        modules.pop(None, None)
        out.append({"pid": pid, "sampled_s": round(len(samples) / rate, 1),
                    "imports_s": share(samples, lambda f: f["name"] == IMPORT_FRAME),
                    "triton_compile_s": share(samples, lambda f: bool(TRITON_COMPILE.search(f.get("file", "")))),
                    f"first_{first_s:g}s_in_imports_s": share(head, lambda f: f["name"] == IMPORT_FRAME),
                    f"first_{first_s:g}s_modules": [name for name, _ in modules.most_common(4)]})
    return out


def _innermost_import(frames: list[dict], stack: list[int]) -> str | None:
    """The module whose top-level code runs at the innermost import of a sample (its `<module>` frame's file)."""
    for index in reversed(stack):
        frame = frames[index]
        if frame["name"] == "<module>":
            path = frame.get("file", "")
            return re.sub(r"^.*?(site-packages|dist-packages|lib/python3\.\d+)/", "", path)
    return None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1], encoding="utf-8") as handle:
        print(json.dumps(summarise(json.load(handle)), indent=1))
