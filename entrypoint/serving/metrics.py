"""The queue figures from vLLM's Prometheus `/metrics`: what the script's users read in vLLM's log line
"Avg prompt throughput ... Running: N reqs, Waiting: M reqs, GPU KV cache usage: X%".

Names as vLLM 0.27.1 registers them (vllm/v1/metrics/loggers.py, PrometheusStatLogger): gauges
per engine (labels model_name, engine), counters with Prometheus's `_total` suffix. Throughput is
the counters' growth between two samples.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"  # a fraction: 1 means 100 percent
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PREEMPTIONS = "vllm:num_preemptions_total"
WANTED = (RUNNING, WAITING, KV_USAGE, PROMPT_TOKENS, GENERATION_TOKENS, PREEMPTIONS)
_SAMPLE = re.compile(r"(vllm:[A-Za-z0-9_:]+)(?:\{[^}]*\})?\s+(\S+)")


def parse(text: str) -> dict[str, list[float]]:
    """Every sample of the wanted metrics, one value per label set (one per engine under data parallel)."""
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) not in WANTED:
            continue
        try:
            number = float(match.group(2))
        except ValueError:
            continue
        if math.isfinite(number):
            found.setdefault(match.group(1), []).append(number)
    return found


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    running: float
    waiting: float
    kv_usage: float | None
    prompt_tokens: float
    generation_tokens: float
    preemptions: float


def sample(text: str, at: float) -> Sample | None:
    """None when the page holds none of vLLM's scheduler gauges (not vLLM's /metrics, or not yet)."""
    values = parse(text)
    if RUNNING not in values and WAITING not in values:
        return None
    kv = values.get(KV_USAGE)
    return Sample(at, sum(values.get(RUNNING, [])), sum(values.get(WAITING, [])),
                  max(kv) if kv else None,  # the fullest engine is the one that queues
                  sum(values.get(PROMPT_TOKENS, [])), sum(values.get(GENERATION_TOKENS, [])),
                  sum(values.get(PREEMPTIONS, [])))


def figures(latest: Sample, earlier: Sample | None) -> dict:
    """The status page's "queue": counts now, throughput over the interval since `earlier`."""
    queue = {"running": int(latest.running), "waiting": int(latest.waiting),
             "kv_cache_usage_percent": None if latest.kv_usage is None else round(latest.kv_usage * 100, 1),
             "prompt_tokens_per_s": None, "generation_tokens_per_s": None, "over_s": None,
             "preemptions": int(latest.preemptions)}
    if earlier is not None and latest.at > earlier.at:
        span = latest.at - earlier.at
        # A counter that went down belongs to a restarted vLLM: no rate across it.
        if latest.prompt_tokens >= earlier.prompt_tokens and latest.generation_tokens >= earlier.generation_tokens:
            queue["prompt_tokens_per_s"] = round((latest.prompt_tokens - earlier.prompt_tokens) / span, 1)
            queue["generation_tokens_per_s"] = round((latest.generation_tokens - earlier.generation_tokens) / span, 1)
            queue["over_s"] = round(span, 1)
    return queue
