#!/usr/bin/env python3
"""The keep-alive bridge at the engine's peak: many concurrent streams, closed loop, as `vllm bench serve` drives it.

Starts the stand-in vLLM (prebake_testing/standin.py), the bridge in front of it with everything the pod runs on
(an API key checked, a `claude-*` model renamed to the served name, idle tracking from the launcher's state file,
heartbeats armed) and nginx set up as RunPod's proxy (prebake_testing/servers.py), then for each case drives
N workers, each sending its next streaming request as soon as its previous answer ended (vLLM's benchmark client
does the same with --max-concurrency), against: the stand-in directly, the bridge, and nginx (the yardstick of
what any proxy adds). Cases: chat (/v1/chat/completions) and messages (/v1/messages); the stand-in paced like vLLM
(one event per write per stream, --gap apart) or at its full speed (all events at once); a small body or a large
one (--big-kib of JSON text, as Claude Code's 100k-token prompts are).

For each target it prints, over a measured window after a warm-up:
- events/s: SSE events the client received per second;
- CPU µs/event: the proxy process's user+system CPU (/proc/PID/stat) over the window per event (for direct: the
  stand-in's own, as a scale);
- TTFT p50/p99: send to the first event's receipt; `+` is the difference against direct in the same case;
- way in p50/p99: send to the moment the stand-in wrote the first event (its event log, CLOCK_MONOTONIC on both
  sides): what the request's way to vLLM costs, against direct again.

    python3 benchmarks/bridge_peak_bench.py                       # the whole matrix, a table
    python3 benchmarks/bridge_peak_bench.py --shapes chat --pacing paced --bodies big --json
    python3 benchmarks/bridge_peak_bench.py --bridge /tmp/old/entrypoint/bridge.py   # another version's bridge
    python3 benchmarks/bridge_peak_bench.py --compare /tmp/old/entrypoint/bridge.py  # both, alternated: an A/B
    python3 benchmarks/bridge_peak_bench.py --bridge-loop asyncio --compare entrypoint/bridge.py  # asyncio vs uvloop
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from prebake_testing.net import get, wait_until
from prebake_testing.runstate import write_state
from prebake_testing.servers import BRIDGE, Server, StandIn, start_bridge, start_nginx

KEY = "bench-key-0123456789"
SERVED = "ornith"  # the stand-in's model name; requests ask for a Claude Code name, which the bridge renames
ASKED = "claude-sonnet-4-5-20250929"
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}
MARK = b"data: "  # one per SSE event in both APIs


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def body_of(shape: str, big_bytes: int) -> bytes:
    """A streaming request as Claude Code sends it: `model` first, the prompt, `stream` last."""
    text = "hi" if not big_bytes else ("lorem ipsum dolor sit amet " * (big_bytes // 27 + 1))[:big_bytes]
    if shape == "messages":
        request = {"model": ASKED, "max_tokens": 256, "system": [{"type": "text", "text": "You are a bench."}],
                   "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
                   "thinking": {"type": "disabled"}, "stream": True}
    else:
        request = {"model": ASKED, "messages": [{"role": "user", "content": text}], "max_tokens": 256,
                   "stream": True}
    return json.dumps(request).encode()


@dataclass
class Phase:
    events: int = 0
    ttft: list[float] = field(default_factory=list)
    sent: dict[str, float] = field(default_factory=dict)  # request id -> send time (measured ones)
    failures: int = 0
    requests: int = 0
    client_cpu: float = 0.0  # this process's CPU seconds in the window


async def worker(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict, phase: Phase,
                 window: tuple[float, float], names: itertools.count, tag: str) -> None:
    start, end = window
    while time.monotonic() < end:
        rid = f"{tag}-{next(names)}"
        sent = time.monotonic()
        measured = start <= sent < end
        first = None
        tail = b""
        try:
            async with session.post(url, data=body, headers={**headers, "x-standin-id": rid}) as answer:
                if answer.status != 200:
                    phase.failures += 1
                    await answer.read()
                    continue
                async for chunk in answer.content.iter_any():
                    now = time.monotonic()
                    joined = tail + chunk
                    seen = joined.count(MARK)
                    tail = joined[-(len(MARK) - 1):]
                    if seen and first is None:
                        first = now
                    if start <= now < end:
                        phase.events += seen
        except aiohttp.ClientError:
            phase.failures += 1
            continue
        if measured and first is not None:
            phase.requests += 1
            phase.ttft.append(first - sent)
            phase.sent[rid] = sent


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def drive(url: str, body: bytes, headers: dict, streams: int, warm_s: float, run_s: float, pid: int,
                tag: str) -> tuple[Phase, float, float]:
    """One target: `streams` closed-loop workers; (what they saw, CPU seconds of `pid` in the window, window)."""
    phase = Phase()
    now = time.monotonic()
    window = (now + warm_s, now + warm_s + run_s)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as session:
        names = itertools.count()
        workers = [asyncio.ensure_future(worker(session, url, body, headers, phase, window, names, tag))
                   for _ in range(streams)]
        await asyncio.sleep(max(0.0, window[0] - time.monotonic()))
        cpu0, mine0, t0 = cpu_s(pid), cpu_s(os.getpid()), time.monotonic()
        await asyncio.sleep(max(0.0, window[1] - time.monotonic()))
        cpu1, mine1, t1 = cpu_s(pid), cpu_s(os.getpid()), time.monotonic()
        await asyncio.gather(*workers)
    phase.client_cpu = mine1 - mine0
    return phase, cpu1 - cpu0, t1 - t0


def first_bytes(standin: StandIn) -> dict[str, float]:
    return {e["id"]: e["first_byte_at"] for e in standin.events() if e.get("event") == "done" and e.get("first_byte_at")}


def run_case(targets: dict[str, tuple[int, int]], standin: StandIn, shape: str, pacing: str, big: int,
             args: argparse.Namespace) -> list[dict]:
    body = body_of(shape, big)
    headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}",
               "anthropic-version": "2023-06-01", "x-standin-record": "0",
               "x-standin-chunks": str(args.events), "x-standin-gap": str(args.gap if pacing == "paced" else 0)}
    rows = []
    for name, (port, pid) in targets.items():
        tag = f"{name}-{shape}-{pacing}-{big}-{time.monotonic_ns()}"
        phase, cpu, window = asyncio.run(drive(f"http://127.0.0.1:{port}{PATHS[shape]}", body, headers, args.streams,
                                               args.warm, args.seconds, pid, tag))
        wrote = first_bytes(standin)
        way_in = [wrote[rid] - sent for rid, sent in phase.sent.items() if rid in wrote]
        rows.append({"shape": shape, "pacing": pacing, "body_bytes": len(body), "target": name,
                     "streams": args.streams, "events_per_s": phase.events / window,
                     "cpu_us_per_event": cpu / phase.events * 1e6 if phase.events else None,
                     "cpu_s_per_s": cpu / window, "client_cpu_s_per_s": phase.client_cpu / window,
                     "requests": phase.requests, "failures": phase.failures,
                     "ttft_p50_ms": pct(phase.ttft, 0.5) * 1e3, "ttft_p99_ms": pct(phase.ttft, 0.99) * 1e3,
                     "way_in_p50_ms": pct(way_in, 0.5) * 1e3, "way_in_p99_ms": pct(way_in, 0.99) * 1e3})
    direct = rows[0]
    for row in rows:
        for key in ("ttft_p50_ms", "ttft_p99_ms", "way_in_p50_ms", "way_in_p99_ms"):
            row["added_" + key] = row[key] - direct[key]
        row["events_ratio"] = row["events_per_s"] / direct["events_per_s"] if direct["events_per_s"] else None
    return rows


def hidden_uvloop(folder: Path) -> str:
    """A folder for PYTHONPATH where `import uvloop` fails: the bridge (and uvicorn) run on asyncio's own loop."""
    shadow = folder / "no-uvloop"
    shadow.mkdir(exist_ok=True)
    (shadow / "uvloop.py").write_text("raise ImportError('uvloop hidden by bridge_peak_bench --bridge-loop asyncio')\n")
    return str(shadow)


def start_the_bridge(args: argparse.Namespace, upstream: int, folder: Path, path: str | None, loop: str) -> Server:
    """The bridge as the pod runs it: key, renaming, idle tracking (the launcher's state file), heartbeats; `path`:
    another version's bridge.py (None: this checkout's)."""
    folder.mkdir(parents=True, exist_ok=True)
    state = write_state(folder / "run", {"VL_IDLE_STOP": "60", "RUNPOD_POD_ID": "bench", "RUNPOD_API_KEY": "bench",
                                         "RUNPOD_REST_URL": "http://127.0.0.1:9/v2"})
    extra_env = {key: state[key] for key in ("PREBAKE_RUN_DIR", "RUNPOD_API_KEY")}
    if loop == "asyncio":
        extra_env["PYTHONPATH"] = os.pathsep.join(filter(None, [hidden_uvloop(folder), os.environ.get("PYTHONPATH")]))
    os.environ.update(extra_env)  # Server passes os.environ on, with VLLM_API_KEY over it
    extra = ["--served-names", json.dumps([SERVED])]
    if path is None:
        server = start_bridge(upstream, heartbeat=args.heartbeat, key=KEY, extra=extra)
    else:
        from prebake_testing.net import free_port
        port = free_port()
        server = Server([sys.executable, path, "--host", "127.0.0.1", "--port", str(port), "--upstream",
                         f"http://127.0.0.1:{upstream}", "--heartbeat", str(args.heartbeat), *extra], port,
                        "the bridge", env={"VLLM_API_KEY": KEY})
        wait_until(lambda: get(port, "/health")[0] == 200, 15, "the bridge's /health", server.process)
    for key in extra_env:
        os.environ.pop(key, None)
    return server


def main(argv: list[str]) -> int:
    try:  # the client's own cost stays low (vLLM's benchmark client runs on its own cores)
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64, help="concurrent closed-loop workers (64)")
    parser.add_argument("--events", type=int, default=256, help="output tokens per request (256)")
    parser.add_argument("--gap", type=float, default=0.006, help="paced: seconds between two events of a stream")
    parser.add_argument("--big-kib", type=int, default=400, help="the large body's prompt text (400 KiB)")
    parser.add_argument("--shapes", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument("--pacing", nargs="+", default=["paced", "full"], choices=["paced", "full"])
    parser.add_argument("--bodies", nargs="+", default=["small", "big"], choices=["small", "big"])
    parser.add_argument("--targets", nargs="+", default=["direct", "bridge", "nginx"],
                        choices=["direct", "bridge", "nginx"], help="direct always runs first: the baseline")
    parser.add_argument("--warm", type=float, default=3.0, help="seconds before the window")
    parser.add_argument("--seconds", type=float, default=12.0, help="the measured window per target")
    parser.add_argument("--heartbeat", type=float, default=15.0, help="the bridge's --heartbeat (15, the pod's)")
    parser.add_argument("--bridge", help="another version's entrypoint/bridge.py (default: this checkout's)")
    parser.add_argument("--compare", metavar="PATH",
                        help="another version's bridge.py as one more target, `compare`, alternated with `bridge`")
    parser.add_argument("--bridge-loop", choices=["auto", "asyncio"], default="auto",
                        help="asyncio: run the `bridge` target with uvloop hidden (`compare` keeps auto)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args(argv)
    targets_wanted = ["direct", *[t for t in args.targets if t != "direct"]]

    began, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), loadavg()
    servers: list[Server] = []
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="peak-bench-") as tmp:
        try:
            standin = StandIn()
            servers.append(standin)
            targets = {"direct": (standin.port, standin.process.pid)}
            if "bridge" in targets_wanted:
                bridge = start_the_bridge(args, standin.port, Path(tmp) / "bridge", args.bridge, args.bridge_loop)
                servers.append(bridge)
                targets["bridge"] = (bridge.port, bridge.process.pid)
            if args.compare:
                other = start_the_bridge(args, standin.port, Path(tmp) / "compare", args.compare, "auto")
                servers.append(other)
                targets["compare"] = (other.port, other.process.pid)
            if "nginx" in targets_wanted:
                nginx = start_nginx(Path(tmp) / "nginx", standin.port)
                servers.append(nginx)
                targets["nginx"] = (nginx.port, nginx.process.pid)
            for shape, pacing, body in itertools.product(args.shapes, args.pacing, args.bodies):
                rows += run_case(targets, standin, shape, pacing, args.big_kib * 1024 if body == "big" else 0, args)
                if not args.json:
                    print_rows(rows[-len(targets):], header=len(rows) == len(targets))
        finally:
            for server in reversed(servers):
                server.stop()
    meta = {"began": began, "load_before": load_before, "load_after": loadavg(), "cpus": os.cpu_count(),
            "command": " ".join(["python3", "benchmarks/bridge_peak_bench.py", *argv]),
            "python": sys.version.split()[0], "bridge_loop": args.bridge_loop}
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
    else:
        print(f"\n{meta['command']}\n{began}, {os.cpu_count()} CPUs, load {load_before} -> {meta['load_after']}, "
              f"Python {meta['python']}, bridge loop {args.bridge_loop}")
    return 0


def print_rows(rows: list[dict], header: bool) -> None:
    if header:
        print(f"{'case':<28} {'target':<7} {'events/s':>9} {'ratio':>6} {'CPU us/ev':>9} {'CPU s/s':>7} {'client':>6} "
              f"{'TTFT p50':>9} {'(+)':>7} {'TTFT p99':>9} {'(+)':>7} {'in p50':>7} {'(+)':>7} {'in p99':>7} "
              f"{'(+)':>7} {'fail':>4}")
    for r in rows:
        case = f"{r['shape']} {r['pacing']} {r['body_bytes'] // 1024}KiB x{r['streams']}"
        cpu = f"{r['cpu_us_per_event']:.1f}" if r["cpu_us_per_event"] is not None else "-"
        print(f"{case:<28} {r['target']:<7} {r['events_per_s']:>9.0f} {r['events_ratio'] or 0:>6.3f} {cpu:>9} "
              f"{r['cpu_s_per_s']:>7.2f} {r['client_cpu_s_per_s']:>6.2f} {r['ttft_p50_ms']:>9.1f} {r['added_ttft_p50_ms']:>+7.1f} "
              f"{r['ttft_p99_ms']:>9.1f} {r['added_ttft_p99_ms']:>+7.1f} {r['way_in_p50_ms']:>7.1f} "
              f"{r['added_way_in_p50_ms']:>+7.1f} {r['way_in_p99_ms']:>7.1f} {r['added_way_in_p99_ms']:>+7.1f} "
              f"{r['failures']:>4}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
