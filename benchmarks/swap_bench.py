#!/usr/bin/env python3
"""What a swap costs beyond vLLM's own start, and how many swaps an interleaved two-model workload causes.

Runs the real launcher with VL_SWAP=ornith:ornith,qwen:qwen on a fake H200, with stand-in `vllm` processes
that take --start-s to listen (prebake_testing/swappod.py; a fake nvidia-smi whose memory follows them):
- the stand-in's own start: the stand-in run alone, from its exec to its first /health 200 (median);
- swap overhead: a request naming the other model, from the client's send to its whole answer, minus that
  start; what remains is the swap itself (stop, process-group check, GPU memory query, health polling,
  queueing, relaying), sequential swaps both ways;
- swaps for an interleaved workload: --clients clients at once, each sending --rounds requests to each
  model alternately (ornith, qwen, ornith, ...); the fewest swaps that serve it is 2 x rounds - 1, one per
  model's queue per round;
- with sleep mode (VL_SWAP_SLEEP=1): the stand-ins sleep and wake at once, so a request naming the other
  model, send to whole answer, is the bridge's own part of such a swap (the sleep and wake calls, the health
  check, the relay), to set beside vLLM's sleep and wake measured on a GPU (docs/swap.md).
The restart-based pods run with VL_SWAP_SLEEP=off.

    python3 benchmarks/swap_bench.py            # a table; --json for one JSON object
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from prebake_testing.net import free_port, get, request
from prebake_testing.swappod import SwapPod


def chat(port: int, model: str, delay: float = 0.0) -> str:
    status, _, raw = request(port, "POST", "/v1/chat/completions",
                             {"model": model, "messages": [{"role": "user", "content": "hi"}]},
                             {"x-standin-delay": str(delay), "x-standin-record": "0"}, timeout=120)
    if status != 200:
        raise RuntimeError(f"{model}: HTTP {status}: {raw[:300]!r}")
    return json.loads(raw)["model"]


def standin_start_s(pod: SwapPod, runs: int) -> float:
    """The stand-in vLLM alone: exec to first /health 200, as the bridge would see it."""
    times = []
    for _ in range(runs):
        port = free_port()
        began = time.monotonic()
        process = subprocess.Popen([str(Path(pod.env["PATH"].split(":")[0]) / "vllm"), "serve", "x",
                                    "--served-model-name", "qwen", "--port", str(port)], env=pod.env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    if get(port, "/health")[0] == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.005)
            times.append(time.monotonic() - began)
        finally:
            process.kill()
            process.wait()
    return statistics.median(times)


def alternate(pod: SwapPod, swaps: int) -> list[float]:
    """Requests naming qwen, ornith, qwen...: each one a swap; send to whole answer, each."""
    latencies = []
    for i in range(swaps):
        model = "qwen" if i % 2 == 0 else "ornith"
        began = time.monotonic()
        assert chat(pod.port, model) == model
        latencies.append(time.monotonic() - began)
    return latencies


def overhead(start_s: float, swaps: int, folder: Path) -> dict:
    pod = SwapPod(folder, {"ornith": {"start_s": start_s}, "qwen": {"start_s": start_s}},
                  {"VL_HEARTBEAT": "5"}).wait_ready(timeout=60)
    try:
        alone = standin_start_s(pod, 5)
        latencies = alternate(pod, swaps)
        model = "qwen" if swaps % 2 else "ornith"  # the model loaded now
        direct = [0.0] * 5  # the same request with no swap, for the relay's own share
        for i in range(5):
            began = time.monotonic()
            chat(pod.port, model)
            direct[i] = time.monotonic() - began
        assert pod.swaps() == swaps, pod.stderr()
        extra = [latency - alone for latency in latencies]
        return {"standin_start_s": alone, "swap_latency_s": latencies, "overhead_s": extra,
                "overhead_median_s": statistics.median(extra), "overhead_max_s": max(extra),
                "request_without_swap_s": statistics.median(direct)}
    finally:
        pod.stop()


def interleaved(start_s: float, clients: int, rounds: int, request_s: float, folder: Path) -> dict:
    pod = SwapPod(folder, {"ornith": {"start_s": start_s}, "qwen": {"start_s": start_s}},
                  {"VL_HEARTBEAT": "5"}).wait_ready(timeout=60)
    errors: list[BaseException] = []

    def client() -> None:
        try:
            for _ in range(rounds):
                for model in ("ornith", "qwen"):
                    assert chat(pod.port, model, request_s) == model
        except BaseException as err:  # noqa: BLE001 - counted and reported
            errors.append(err)

    try:
        began = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - began
        if errors:
            raise RuntimeError(f"{len(errors)} client(s) failed: {errors[0]}")
        return {"clients": clients, "rounds": rounds, "requests": clients * rounds * 2, "swaps": pod.swaps(),
                "fewest_swaps": 2 * rounds - 1, "wall_s": wall}
    finally:
        pod.stop()


def sleeping(swaps: int, folder: Path) -> dict:
    meminfo = folder / "meminfo"  # RAM enough for level 1 whatever this machine has
    meminfo.write_text(f"MemAvailable: {256 << 20} kB\n")
    pod = SwapPod(folder, {"ornith": {}, "qwen": {}}, {"VL_HEARTBEAT": "5", "VL_SWAP_SLEEP": "1",
                                                      "VL_MEMINFO": str(meminfo), "VL_CGROUP": str(folder)})
    pod.wait_ready(timeout=60)
    try:
        deadline = time.monotonic() + 60
        while "every model started once" not in pod.stderr():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the swap set never finished starting:\n{pod.stderr()}")
            time.sleep(0.05)
        latencies = alternate(pod, swaps)
        started = sum(1 for event in pod.events() if event.endswith(" started"))
        assert pod.swaps() == swaps and started == 2, pod.stderr()  # each model started once: no restart
        return {"swap_latency_s": latencies, "median_s": statistics.median(latencies), "max_s": max(latencies)}
    finally:
        pod.stop()


def report(r: dict) -> str:
    o, w, z = r["overhead"], r["interleaved"], r["sleeping"]
    rows = [
        ("stand-in vLLM's own start, exec to first /health 200 (median of 5)", f"{o['standin_start_s']:.3f} s"),
        ("request naming the other model, send to whole answer, per swap",
         ", ".join(f"{x:.3f}" for x in o["swap_latency_s"]) + " s"),
        ("swap overhead beyond the stand-in's start: median / max", f"{o['overhead_median_s']:.3f} / "
                                                                    f"{o['overhead_max_s']:.3f} s (goal < 1 s)"),
        ("the same request without a swap (median of 5)", f"{o['request_without_swap_s'] * 1000:.1f} ms"),
        (f"interleaved workload: {w['clients']} clients x {w['rounds']} rounds x 2 models = {w['requests']} "
         "requests, swaps", f"{w['swaps']} (fewest possible {w['fewest_swaps']}), {w['wall_s']:.1f} s"),
        ("sleep mode: request naming the other model, send to whole answer (stand-ins wake at once): median / max",
         f"{z['median_s']:.3f} / {z['max_s']:.3f} s"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-s", type=float, default=1.0, help="the stand-in's sleep before it listens")
    parser.add_argument("--swaps", type=int, default=6)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--request-s", type=float, default=0.2, help="each interleaved request's generation time")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="swap-bench-") as tmp:
        for name in ("a", "b", "c"):
            (Path(tmp) / name).mkdir()
        result = {"overhead": overhead(args.start_s, args.swaps, Path(tmp) / "a"),
                  "interleaved": interleaved(args.start_s, args.clients, args.rounds, args.request_s, Path(tmp) / "b"),
                  "sleeping": sleeping(args.swaps, Path(tmp) / "c"), "load_average": os.getloadavg()}
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
