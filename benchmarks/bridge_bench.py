#!/usr/bin/env python3
"""What the keep-alive bridge costs: direct to the stand-in vLLM vs through the bridge, in one run.

Starts the stand-in vLLM (prebake_testing/standin.py, uvicorn) and the bridge (entrypoint/bridge.py)
on loopback, then measures with an aiohttp client that only counts bytes:
- added time to first byte: client's receipt of the first token minus the moment the stand-in
  sent it (both CLOCK_MONOTONIC), median over sequential streams, direct vs bridged;
- streamed chunks per second: one stream of N chat chunks pushed as fast as the stand-in can;
- 64 concurrent streams, each silent for 1 s (heartbeats) then streaming, all complete and intact;
- memory per idle connection: the bridge's RSS with open idle keep-alive connections, and with
  requests held in the heartbeat phase, per connection.

    python3 benchmarks/bridge_bench.py            # prints a table; --json for one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import aiohttp


from prebake_testing.servers import StandIn, start_bridge

CHAT = json.dumps({"model": "ornith", "messages": [{"role": "user", "content": "hi"}], "stream": True})


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def stream(session: aiohttp.ClientSession, url: str, headers: dict) -> tuple[float | None, int, float]:
    """(monotonic time the first token arrived, events received, monotonic time of the end)."""
    first = None
    events = 0
    tail = b""  # a marker may straddle two reads: TCP cuts the stream anywhere
    async with session.post(url + "/v1/chat/completions", data=CHAT,
                            headers={"content-type": "application/json", **headers}) as answer:
        assert answer.status == 200, answer.status
        async for chunk in answer.content.iter_any():
            seen = (tail + chunk).count(b"data: ")
            if first is None and seen:
                first = time.monotonic()
            events += seen
            tail = chunk[-5:]
    return first, events, time.monotonic()


async def ttfb(session, url: str, standin: StandIn, runs: int, tag: str) -> list[float]:
    delays = []
    for n in range(runs):
        rid = f"ttfb-{tag}-{n}"
        first, _, _ = await stream(session, url, {"x-standin-id": rid, "x-standin-delay": "0.01",
                                                  "x-standin-chunks": "2", "x-standin-record": "0"})
        delays.append(first)
    sent = {e["id"]: e["first_byte_at"] for e in standin.events() if e["id"].startswith(f"ttfb-{tag}-")}
    return [(got - sent[f"ttfb-{tag}-{n}"]) * 1000 for n, got in enumerate(delays)]


async def throughput(session, url: str, standin: StandIn, chunks: int, rid: str) -> float:
    """Events per second from the moment the stand-in wrote its first chunk to the client's last byte:
    the stand-in's own preparation is left out, and so is nothing the relay adds."""
    _, events, end = await stream(session, url, {"x-standin-id": rid, "x-standin-chunks": str(chunks),
                                                 "x-standin-record": "0"})
    assert events == chunks + 2, events  # role chunk + tokens + [DONE]
    return events / (end - standin.event(rid)["first_byte_at"])


async def concurrent(session, url: str, streams: int, chunks: int) -> tuple[float, int]:
    began = time.monotonic()
    results = await asyncio.gather(*(stream(session, url, {"x-standin-delay": "1", "x-standin-chunks": str(chunks),
                                                           "x-standin-gap": "0.002", "x-standin-record": "0"})
                                     for _ in range(streams)))
    complete = sum(1 for _, events, _ in results if events == chunks + 2)
    return time.monotonic() - began, complete


async def idle_memory(bridge, connections: int) -> float:
    before = rss_kib(bridge.process.pid)
    writers = []
    for _ in range(connections):
        writers.append((await asyncio.open_connection("127.0.0.1", bridge.port))[1])
    await asyncio.sleep(1.0)
    after = rss_kib(bridge.process.pid)
    for writer in writers:
        writer.close()
    return (after - before) / connections


async def waiting_memory(bridge, url: str, requests: int) -> float:
    before = rss_kib(bridge.process.pid)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        tasks = [asyncio.ensure_future(stream(session, url, {"x-standin-delay": "30", "x-standin-record": "0"}))
                 for _ in range(requests)]
        await asyncio.sleep(3.0)  # every request is in its heartbeat phase by now
        after = rss_kib(bridge.process.pid)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return (after - before) / requests


async def measure(args, standin: StandIn, bridge) -> dict:
    direct, bridged = standin.url, bridge.url
    # Memory first, on the fresh bridge: later traffic would leave freed memory that new connections reuse.
    memory = {"bridge_rss_start": rss_kib(bridge.process.pid),
              "per_idle_connection": await idle_memory(bridge, args.idle),
              "per_waiting_request": await waiting_memory(bridge, bridged, args.waiting),
              "idle_connections": args.idle, "waiting_requests": args.waiting}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for url in (direct, bridged):  # warm-up: connections, imports, caches
            await ttfb(session, url, standin, 20, "warm" + str(url == bridged))
        results = {}
        lat_direct = await ttfb(session, direct, standin, args.runs, "direct")
        lat_bridged = await ttfb(session, bridged, standin, args.runs, "bridged")
        results["ttfb_ms"] = {"direct_median": statistics.median(lat_direct),
                              "bridged_median": statistics.median(lat_bridged),
                              "added_median": statistics.median(lat_bridged) - statistics.median(lat_direct),
                              "bridged_p90": statistics.quantiles(lat_bridged, n=10)[-1],
                              "runs": args.runs}
        rates_direct, rates_bridged = [], []
        bridge_cpu = standin_cpu = 0.0
        for _ in range(args.repeat):  # interleaved, so that a noisy neighbour hits both
            before = cpu_s(standin.process.pid)
            rates_direct.append(await throughput(session, direct, standin, args.chunks, f"rate-d{len(rates_direct)}"))
            standin_cpu += cpu_s(standin.process.pid) - before
            before = cpu_s(bridge.process.pid)
            rates_bridged.append(await throughput(session, bridged, standin, args.chunks, f"rate-b{len(rates_bridged)}"))
            bridge_cpu += cpu_s(bridge.process.pid) - before
        relayed = args.repeat * (args.chunks + 2)
        ratios = sorted(b / d for b, d in zip(rates_bridged, rates_direct))
        results["chunks_per_s"] = {"direct": statistics.median(rates_direct),
                                   "bridged": statistics.median(rates_bridged),
                                   "ratio": statistics.median(ratios), "ratio_min": ratios[0], "ratio_max": ratios[-1],
                                   "chunks": args.chunks, "repeat": args.repeat,
                                   # what each side spends per chunk: the bridge's capacity on a free core
                                   "bridge_cpu_us_per_chunk": bridge_cpu / relayed * 1e6,
                                   "standin_cpu_us_per_chunk": standin_cpu / relayed * 1e6}
        conc = {}
        for name, url in (("direct", direct), ("bridged", bridged)):
            before = cpu_s(bridge.process.pid)
            seconds, complete = await concurrent(session, url, args.streams, args.stream_chunks)
            conc[name] = {"seconds": seconds, "complete": complete}
        # At this pace (one token per chunk, as vLLM sends them) the bridge reads every chunk on its own.
        conc["bridge_cpu_us_per_chunk"] = (cpu_s(bridge.process.pid) - before) / (
            args.streams * (args.stream_chunks + 2)) * 1e6
        results["concurrent"] = {"streams": args.streams, "chunks_each": args.stream_chunks, **conc}
    results["memory_kib"] = memory
    return results


def report(r: dict) -> str:
    t, c, k, m = r["ttfb_ms"], r["chunks_per_s"], r["concurrent"], r["memory_kib"]
    return "\n".join([
        "| figure | direct | through the bridge | target |",
        "|---|---|---|---|",
        f"| time to first token after upstream sent it, median of {t['runs']} (ms) | {t['direct_median']:.3f} | "
        f"{t['bridged_median']:.3f} (p90 {t['bridged_p90']:.3f}) | added < 1 ms: **{t['added_median']:+.3f} ms** |",
        f"| chunks/s, one stream of {c['chunks']}, median of {c['repeat']} | {c['direct']:,.0f} | {c['bridged']:,.0f} | "
        f">= 95 %: **{c['ratio'] * 100:.1f} %** (pairs {c['ratio_min'] * 100:.0f}-{c['ratio_max'] * 100:.0f} %) |",
        f"| CPU per chunk (µs): the stand-in producing it / the bridge relaying it | "
        f"{c['standin_cpu_us_per_chunk']:.1f} | {c['bridge_cpu_us_per_chunk']:.1f} "
        f"(= {1e6 / c['bridge_cpu_us_per_chunk']:,.0f} chunks/s per core) | |",
        f"| {k['streams']} concurrent streams (1 s silent, {k['chunks_each']} chunks each): complete, seconds | "
        f"{k['direct']['complete']}/{k['streams']}, {k['direct']['seconds']:.2f} | "
        f"{k['bridged']['complete']}/{k['streams']}, {k['bridged']['seconds']:.2f} | all complete |",
        f"| bridge CPU per chunk in those streams (µs) | - | {k['bridge_cpu_us_per_chunk']:.1f} | |",
        f"| bridge RSS at start (MiB) | - | {m['bridge_rss_start'] / 1024:.1f} | |",
        f"| memory per idle keep-alive connection ({m['idle_connections']}) (KiB) | - | "
        f"{m['per_idle_connection']:.1f} | |",
        f"| memory per request waiting in heartbeats ({m['waiting_requests']}) (KiB) | - | "
        f"{m['per_waiting_request']:.1f} | |",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="sequential streams for the time to first byte")
    parser.add_argument("--chunks", type=int, default=20000, help="chunks in the throughput stream")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--stream-chunks", type=int, default=500)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--waiting", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    standin = StandIn()
    bridge = start_bridge(standin.port, heartbeat=0.5)
    try:
        results = asyncio.run(measure(args, standin, bridge))
    finally:
        bridge.stop()
        standin.stop()
    print(json.dumps(results, indent=1) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
