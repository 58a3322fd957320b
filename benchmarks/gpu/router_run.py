"""harness.py router: does session affinity keep a pod's prefix cache (docs/router.md, "Measured")?

Two plain vLLM servers of the tiny model (tiny/qwen3), each with 0.4 of the GPU, behind vLLM's router
(vllm-router 0.1.17, the real binary); a dozen concurrent Claude Code-shaped sessions replayed through it, each
growing turn by turn as the recorded session does (tests/fixtures/claude_code_session.jsonl.xz, 25 requests of
20-25k tokens); every session's text made its own (a marker at the start of its system prompt). Three
replays, each with its own markers so that none reuses another's cache:
  one server   straight at the first server: the reference
  affinity     the router with --policy consistent_hash, each session's X-Session-ID
  round robin  the router with --policy round_robin
For each: vLLM's prefix-cache hit rate (vllm:prefix_cache_hits / vllm:prefix_cache_queries, summed over the
servers, from their /metrics) and the mean time to the first streamed chunk.

vllm-router carries /v1/chat/completions by policy, not Claude Code's /v1/messages (tests/router/), so the
replay sends each recorded Anthropic request as a chat request: the same system prompt, tools and history, the
tool calls and results written out as text. What is measured is where each session's turns land.

The router's wheel: VLLM_ROUTER_WHEEL, else .whl/vllm_router-0.1.17-*.whl in the repository, installed with
pip --no-deps into /root/router (its Rust router needs none of its Python dependencies; the shim below
imports only its argument parser and the Rust extension). HARNESS_VLLM replaces `vllm` (a stand-in, to try the
run's logic without a GPU: HARNESS_VLLM="python3 -m prebake_testing.standin").
"""

from __future__ import annotations

import concurrent.futures
import glob
import http.client
import json
import lzma
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "tests" / "fixtures" / "claude_code_session.jsonl.xz"
ROUTER_SITE = Path(os.environ.get("HARNESS_ROUTER_SITE", "/root/router"))
MODEL, SERVED = "tiny/qwen3", "tiny"
SESSIONS = 12
MAX_TOKENS = 8
GOAL_POINTS = 5.0  # affinity's hit rate within this many points of one server's
SHIM = ("import argparse, sys; from vllm_router.router_args import RouterArgs; from vllm_router.router import Router; "
        "p = argparse.ArgumentParser(); RouterArgs.add_cli_args(p); a = RouterArgs.from_cli_args(p.parse_args()); "
        "a._validate_router_args(); Router.from_args(a).start()")
Check = Callable[..., bool]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_call(port: int, method: str, path: str, body: dict | None = None, headers: dict | None = None,
              timeout: float = 120) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, json.dumps(body) if body is not None else None,
                           {"content-type": "application/json", **(headers or {})})
        answer = connection.getresponse()
        return answer.status, answer.read()
    except OSError as err:
        return 0, str(err).encode()
    finally:
        connection.close()


def wait_for(what: Callable[[], bool], limit_s: float, process: subprocess.Popen | None = None) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if what():
            return time.monotonic() - started
        if process is not None and process.poll() is not None:
            return None
        time.sleep(0.5)
    return None


# --- the sessions ------------------------------------------------------------------------------------------
def load_turns(path: Path = SESSION) -> list[dict]:
    """The recording's main-conversation requests, in order (the background calls carry no tools)."""
    with lzma.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [row["body"] for row in rows if row["body"].get("tools") and "count_tokens" not in row.get("path", "")]


def _text(content) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "tool_use":
            parts.append(f"[tool call {block.get('name')} {json.dumps(block.get('input'), sort_keys=True)}]")
        elif kind == "tool_result":
            parts.append(f"[tool result] {_text(block.get('content') or '')}")
        elif kind not in ("thinking", "redacted_thinking", "image"):
            parts.append(json.dumps(block, sort_keys=True))
    return "\n".join(parts)


def chat_body(anthropic: dict, marker: str) -> dict:
    """One recorded Anthropic request as a chat request, its text made this session's by `marker`."""
    system = anthropic.get("system") or ""
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text"
                     and not b["text"].startswith("x-anthropic-billing-header"))
    messages = [{"role": "system", "content": f"[{marker}] Working directory: /home/{marker}/project\n{text}"}]
    for message in anthropic["messages"]:
        if message["role"] == "system":  # Claude Code's inline reminders: Qwen's template takes one system, first
            messages.append({"role": "user", "content": f"<system-reminder>{_text(message['content'])}</system-reminder>"})
        else:
            messages.append({"role": message["role"], "content": _text(message["content"])})
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t["input_schema"]}}
             for t in anthropic.get("tools", []) if "input_schema" in t]
    return {"model": SERVED, "messages": messages, "tools": tools, "max_tokens": MAX_TOKENS, "temperature": 0,
            "stream": True}


def first_chunk_s(port: int, body: dict, session: str) -> tuple[int, float | None]:
    """Send one streamed request; the status and the seconds to its first data line (None if it never came)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    began = time.monotonic()
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps(body),
                           {"content-type": "application/json", "x-session-id": session})
        answer = connection.getresponse()
        first = None
        while line := answer.readline():
            if first is None and line.startswith(b"data:"):
                first = time.monotonic() - began
        return answer.status, first
    except OSError:
        return 0, None
    finally:
        connection.close()


def replay(port: int, turns: list[dict], salt: str) -> dict:
    """SESSIONS sessions at once, each sending its turns one after the other as Claude Code does."""
    def one(n: int) -> list[tuple[int, float | None]]:
        marker = f"{salt}-dev{n:02d}"
        return [first_chunk_s(port, chat_body(turn, marker), marker) for turn in turns]
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(SESSIONS) as pool:
        results = [r for session in pool.map(one, range(SESSIONS)) for r in session]
    firsts = [first for status, first in results if status == 200 and first is not None]
    return {"requests": len(results), "ok": len(firsts), "errors": sorted({s for s, f in results if s != 200 or f is None}),
            "mean_ttft_s": round(sum(firsts) / len(firsts), 4) if firsts else None,
            "wall_s": round(time.monotonic() - began, 1)}


# --- the servers ---------------------------------------------------------------------------------------------
def prefix_counters(port: int) -> tuple[float, float]:
    status, raw = http_call(port, "GET", "/metrics", timeout=30)
    text = raw.decode(errors="replace") if status == 200 else ""
    def total(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))
    return total("vllm:prefix_cache_queries_total"), total("vllm:prefix_cache_hits_total")


def vllm_command() -> list[str]:
    override = os.environ.get("HARNESS_VLLM")
    return shlex.split(override) if override else [sys.executable, "-m", "vllm.entrypoints.cli.main"]


def start_vllm(port: int, log: Path) -> subprocess.Popen:
    args = ["serve", MODEL, "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port),
            "--gpu-memory-utilization", "0.4", "--max-model-len", "40960", "--enforce-eager",
            "--enable-prefix-caching", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    return subprocess.Popen([*vllm_command(), *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def router_env() -> dict:
    """vllm-router importable: already, or from its wheel installed into ROUTER_SITE."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROUTER_SITE), os.environ.get("PYTHONPATH")]))}
    probe = [sys.executable, "-c", "import vllm_router.router, vllm_router_rs"]
    if subprocess.run(probe, env=env, capture_output=True).returncode == 0:
        return env
    wheels = [os.environ["VLLM_ROUTER_WHEEL"]] if os.environ.get("VLLM_ROUTER_WHEEL") else \
        sorted(glob.glob(str(REPO / ".whl" / "vllm_router-0.1.17-*.whl")))
    if not wheels:
        raise RuntimeError("no vllm-router wheel: put vllm_router-0.1.17-cp38-abi3-manylinux_2_28_x86_64.whl in .whl/ "
                           "or name it in VLLM_ROUTER_WHEEL")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                           str(ROUTER_SITE), wheels[0]], capture_output=True, text=True)
    if done.returncode != 0 or subprocess.run(probe, env=env, capture_output=True).returncode != 0:
        raise RuntimeError(f"vllm-router did not install from {wheels[0]}: {done.stderr[-400:]}")
    return env


def start_router(policy: str, workers: list[int], env: dict, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", SHIM, "--host", "127.0.0.1", "--port", str(port),
                                "--policy", policy, "--prometheus-port", str(free_port()),
                                "--worker-urls", *[f"http://127.0.0.1:{w}" for w in workers]],
                               env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    return process, port


def stop(process: subprocess.Popen, grace_s: float = 30) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def measured(ports: list[int], run: Callable[[], dict]) -> dict:
    before = [prefix_counters(p) for p in ports]
    figures = run()
    time.sleep(1.5)  # vLLM's metrics follow its engine's steps by a logging interval
    after = [prefix_counters(p) for p in ports]
    queries = [a[0] - b[0] for a, b in zip(after, before)]
    hits = [a[1] - b[1] for a, b in zip(after, before)]
    figures["prefix_cache_queries"] = [int(q) for q in queries]  # per server: where the turns went
    figures["hit_rate_pct"] = round(100 * sum(hits) / sum(queries), 2) if sum(queries) else None
    return figures


def run(check: Check, logs: Path) -> dict:
    figures: dict = {"run": "router", "model": MODEL, "sessions": SESSIONS}
    turns = load_turns()
    figures["turns_per_session"] = len(turns)
    env = router_env()
    ports = [free_port(), free_port()]
    servers = []
    try:
        for i, port in enumerate(ports):  # one at a time: each measures the GPU's free memory as it starts
            servers.append(start_vllm(port, logs / f"router-vllm{i}.log"))
            up = wait_for(lambda: http_call(port, "GET", "/health", timeout=5)[0] == 200, 240, servers[-1])
            if not check(f"vLLM server {i} serving (0.4 of the GPU)", up is not None, f"{up and round(up, 1)} s"):
                return {**figures, "ok": False}
        replays = (("one server", None), ("affinity", "consistent_hash"), ("round robin", "round_robin"))
        for label, policy in replays:
            if policy is None:
                figures[label] = measured(ports, lambda: replay(ports[0], turns, "one"))
                continue
            router, port = start_router(policy, ports, env, logs / f"router-{policy}.log")
            try:
                ready = wait_for(lambda: http_call(port, "GET", "/readiness", timeout=5)[0] == 200, 60, router)
                if check(f"vllm-router --policy {policy} ready", ready is not None, str(ready)):
                    figures[label] = measured(ports, lambda: replay(port, turns, policy))
            finally:
                stop(router, 10)
        for label, _ in replays:
            result = figures.get(label) or {}
            check(f"{label}: every request answered", result.get("ok") == result.get("requests") and result.get("ok"),
                  json.dumps(result))
        one, affinity = (figures.get(k, {}).get("hit_rate_pct") for k in ("one server", "affinity"))
        figures["affinity_points_below_one_server"] = None if None in (one, affinity) else round(one - affinity, 2)
        check(f"affinity's hit rate within {GOAL_POINTS:g} points of one server's",
              None not in (one, affinity) and one - affinity <= GOAL_POINTS,
              f"one server {one} %, affinity {affinity} %, round robin {figures.get('round robin', {}).get('hit_rate_pct')} %")
        return figures
    finally:
        for server in servers:
            stop(server)
