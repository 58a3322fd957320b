"""Where a pod's start goes, read from vLLM's own log: the phases of one start, and their medians over runs.

    python3 benchmarks/gpu/start_phases.py gpu-start-cache-8b.json [more runs' JSON...]

harness.py's start runs (start-cache-tiny, start-cache-8b) record, for each pod (cold, restored), the seconds
from the launcher's start to each milestone below, read from the pod's vllm.log, and the held request's first
token. Given one or more of their JSON files (one per device call: a call holds one cold/restored pair), this
prints the table of phases, each the seconds since the previous milestone found, median over the runs.

vLLM stamps its lines to the second in local time without a year ("INFO 12-04 22:42:23 [file.py:53]"): a phase
is +-1 s.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time

# (phase, the line that ends it); the first line matching is taken. The phase's name is what happened before it.
# None: no log line ends it; the harness reads the moment from /proc (procwatch.py) and passes it in `extra`.
MILESTONES = (
    ("imports", r"(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d"),  # the API server's first line
    ("architecture", r"Resolved architecture"),  # the registry's inspection (its subprocess on a miss)
    ("API server set-up", None),  # ends when the engine core's process begins (fork or spawn)
    ("engine core imports", r"\(EngineCore[^)]*\) (?:INFO|WARNING|DEBUG)"),  # its first line comes after them
    ("weights", r"Model loading took"),
    ("compile", r"torch\.compile took|Directly load AOT compilation"),
    ("profiling and graphs", r"init engine \(profile, create kv cache, warmup model\) took"),
    ("server ready", r"Starting vLLM server on"),
)
PHASES = (*(name for name, _ in MILESTONES), "first token")
STAMP = re.compile(r"(?:INFO|WARNING|DEBUG|ERROR) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def stamp_seconds(line: str, year: int) -> float | None:
    """The line's vLLM timestamp as epoch seconds (local time, as vLLM writes it)."""
    found = STAMP.search(line)
    if not found:
        return None
    month, day, hour, minute, second = map(int, found.groups())
    return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))


def milestones(log_text: str, launched: float, extra: dict[str, float | None] | None = None) -> dict[str, float | None]:
    """Seconds from the launcher's start (epoch `launched`) to each milestone's first line, None where absent;
    `extra`: epoch seconds of the milestones no log line marks."""
    year = time.localtime(launched).tm_year
    found: dict[str, float | None] = {name: None for name, _ in MILESTONES}
    for name, at in (extra or {}).items():
        if name in found and at is not None:
            found[name] = round(at - launched, 1)
    for line in log_text.splitlines():
        at = stamp_seconds(line, year)
        if at is None:
            continue
        for name, pattern in MILESTONES:
            if pattern is not None and found[name] is None and re.search(pattern, line):
                found[name] = round(at - launched, 1)
    return found


def phases(marks: dict[str, float | None], first_token_s: float | None) -> dict[str, float | None]:
    """Each phase's seconds: from the previous milestone found (the launcher's start for the first) to its own."""
    out: dict[str, float | None] = {}
    previous = 0.0
    for name in PHASES:
        at = first_token_s if name == "first token" else marks.get(name)
        if at is None:
            out[name] = None
            continue
        out[name] = round(at - previous, 1)
        previous = at
    out["total to first token"] = first_token_s
    return out


def pod_kinds(runs: list[dict]) -> list[str]:
    """The pods the runs hold, in order: cold, restored, and any others a run made (restored-spawn, ...)."""
    return list(dict.fromkeys(key for run in runs for key, value in run.items()
                              if isinstance(value, dict) and "phases" in value))


def table(runs: list[dict]) -> str:
    """Markdown: one row per phase, the median over the runs for each kind of pod, and the run count. A run may
    hold several pods of one kind (`restored` and `restored#2`...): each counts as one run of that kind."""
    pods = [kind for kind in pod_kinds(runs) if "#" not in kind]
    runs = [{kind.split("#")[0]: pod} for run in runs for kind, pod in run.items()
            if isinstance(pod, dict) and "phases" in pod]
    rows = [f"| phase | {' | '.join(pods)} |", f"| --- |{' --- |' * len(pods)}"]
    for name in (*PHASES, "total to first token"):
        cells = []
        for pod in pods:
            values = [run[pod]["phases"][name] for run in runs
                      if run.get(pod, {}).get("phases", {}).get(name) is not None]
            cells.append(f"{statistics.median(values):.1f} s ({len(values)})" if values else "-")
        rows.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(rows)


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    runs = [json.loads(open(path, encoding="utf-8").read()) for path in paths]
    models = sorted({run.get("model", "?") for run in runs})
    print(f"{', '.join(models)}: median seconds per phase (number of runs), from vLLM's log and the held request")
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
