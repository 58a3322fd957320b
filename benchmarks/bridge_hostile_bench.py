#!/usr/bin/env python3
"""What hostile traffic costs the keep-alive bridge: memory, and another client's latency meanwhile.

    python3 benchmarks/bridge_hostile_bench.py [--bridge PATH] [--json]

Starts the stand-in vLLM and a bridge (entrypoint/bridge.py, or --bridge PATH for another version),
then, each scenario on a fresh bridge:
- body: one 200 MB streaming chat request (a JSON body, the prompt in one string);
- heads: 3,000 connections that send part of a request's headers and then nothing;
- bodies: 3,000 requests with whole headers and 100 bytes of a 1 MB body, then nothing.
Meanwhile a second client asks GET /v1/models every 50 ms. Reported: the bridge's peak RSS (VmHWM),
its RSS once the scenario's load is in place, and the second client's latency (median, p99, max),
and for the half-sent requests how many sockets the bridge holds (its clients' and vLLM's) then and
WAIT_S later.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from prebake_testing.servers import StandIn
from prebake_testing.net import free_port, get, wait_for_port

BODY_MB = 200
HALF_SENT = 3000
WAIT_S = 70  # past the bridge's time limits for a request's head (30 s) and a pause in its body (60 s)


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def open_connections(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except FileNotFoundError:  # closed while counting
            pass
    return count


class Prober:
    """A second client: GET /v1/models every 50 ms, its latencies recorded."""

    def __init__(self, port: int) -> None:
        self.port, self.latencies, self.failures, self.running = port, [], 0, True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while self.running:
            began = time.monotonic()
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                connection.request("GET", "/v1/models")
                connection.getresponse().read()
                connection.close()
                self.latencies.append((time.monotonic() - began) * 1000)
            except OSError:
                self.failures += 1
            time.sleep(0.05)

    def stop(self) -> dict:
        self.running = False
        self.thread.join()
        ordered = sorted(self.latencies) or [float("nan")]
        return {"median_ms": round(statistics.median(ordered), 2),
                "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
                "max_ms": round(ordered[-1], 2), "requests": len(self.latencies), "failures": self.failures}


def start(bridge: str, upstream: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen([sys.executable, bridge, "--host", "127.0.0.1", "--port", str(port), "--upstream",
                                f"http://127.0.0.1:{upstream}", "--heartbeat", "15"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ,
                                                                                          "VLLM_API_KEY": ""})
    wait_for_port(port, process, "the bridge")
    while get(port, "/health")[0] != 200:
        time.sleep(0.1)
    return process, port


def big_body(port: int) -> None:
    head = b'{"model": "ornith", "stream": true, "messages": [{"role": "user", "content": "'
    tail = b'"}]}'
    size = BODY_MB * 10**6
    filler = b"word " * 20000
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n" % (len(head) + size + len(tail)) + head)
        sent = 0
        while sent < size:
            piece = filler[:size - sent]
            sock.sendall(piece)
            sent += len(piece)
        sock.sendall(tail)
        sock.settimeout(120)
        answer = sock.recv(100)
        assert answer.startswith(b"HTTP/1.1 200"), answer


def half_sent(port: int, with_body: bool) -> list[socket.socket]:
    sockets = []
    for _ in range(HALF_SENT):
        sock = socket.create_connection(("127.0.0.1", port))
        if with_body:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: 1000000\r\n\r\n" + b'{"stream": true, "x": "' + b"a" * 77)
        else:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-le")
        sockets.append(sock)
    return sockets


def scenario(bridge: str, upstream: int, name: str) -> dict:
    process, port = start(bridge, upstream)
    try:
        return measure(process, port, name)
    finally:  # whatever happened, no bridge is left behind
        process.terminate()
        process.wait(10)


def measure(process: subprocess.Popen, port: int, name: str) -> dict:
    base = status_kib(process.pid, "VmRSS")
    prober = Prober(port)
    time.sleep(1)
    began = time.monotonic()
    result: dict = {"scenario": name, "rss_start_mib": round(base / 1024, 1)}
    if name == "body":
        big_body(port)
        result["seconds"] = round(time.monotonic() - began, 1)
    else:
        sockets = half_sent(port, with_body=name == "bodies")
        time.sleep(3)
        result["rss_loaded_mib"] = round(status_kib(process.pid, "VmRSS") / 1024, 1)
        result["held_at_start"] = open_connections(process.pid)
        time.sleep(WAIT_S)
        result[f"held_after_{WAIT_S}s"] = open_connections(process.pid)
        for sock in sockets:
            sock.close()
    result["peak_rss_mib"] = round(status_kib(process.pid, "VmHWM") / 1024, 1)
    result["other_client"] = prober.stop()
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bridge", default=str(ROOT / "entrypoint" / "bridge.py"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=("body", "heads", "bodies"))
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))
    standin = StandIn()
    try:
        results = [scenario(args.bridge, standin.port, name) for name in ("body", "heads", "bodies")
                   if args.only in (None, name)]
    finally:
        standin.stop()
    print(json.dumps(results, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
