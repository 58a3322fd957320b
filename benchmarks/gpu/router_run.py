"""harness.py router: does the router pod's session affinity keep a pod's prefix cache (docs/router.md, "Measured")?

Two plain vLLM servers of the tiny model (tiny/qwen3), started together, each with its own fixed KV cache; in
front of them THE PRODUCT'S ROUTER: routerpod/router.py's configuration (config_from_env, render) and nginx
started from it, carried to the device as a folder (carry_nginx.sh: the binary and its libraries;
HARNESS_NGINX_DIR, default .whl/nginx). A dozen concurrent Claude Code-shaped sessions replayed through it as
/v1/messages requests (what Claude Code sends; vLLM serves the path itself), each growing turn by turn as the
recorded session does (tests/fixtures/claude_code_session.jsonl.xz, 25 requests of 20-25k tokens), each
session's text made its own (a marker at the start of its system prompt) with its own X-Claude-Code-Session-Id.
Three replays, each with its own markers so that none reuses another's cache:
  one server   straight at the first server: the reference
  affinity     through the router as the router pod runs it (hash on X-Claude-Code-Session-Id)
  round robin  the same configuration without the hash (router.render(..., round_robin=True): nginx's default)
For each: vLLM's prefix-cache hit rate (vllm:prefix_cache_hits / vllm:prefix_cache_queries, summed over the
servers, from their /metrics) and the mean time to the first streamed event.

HARNESS_VLLM replaces `vllm` (a stand-in, to try the run's logic without a GPU:
HARNESS_VLLM="python3 -m prebake_testing.prefix_standin").
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import lzma
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

from routerpod import router  # the router pod's own program

REPO = Path(__file__).resolve().parents[2]

SESSION = REPO / "tests" / "fixtures" / "claude_code_session.jsonl.xz"
NGINX_DIR = Path(os.environ.get("HARNESS_NGINX_DIR") or REPO / ".whl" / "nginx")
MODEL, SERVED = "tiny/qwen3", "tiny"
SESSIONS = 12
MAX_TOKENS = 8
GOAL_POINTS = 5.0  # affinity's hit rate within this many points of one server's
KEY = "router-run-key"  # the router's client key (the servers have none)
# Each server's KV cache, fixed: the two start at once, and vLLM's profile (gpu_memory_utilization alone) would
# count the other's allocations as its own. 8 GiB is 8M tokens of the tiny model (1 KiB a token), several times
# what the three replays hold (12 sessions x ~25k tokens each), so nothing is evicted, as at 0.4 of the GPU.
KV_CACHE_BYTES = 8 << 30
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


def messages_body(anthropic: dict, marker: str) -> dict:
    """One recorded Claude Code request as it is sent, its text made this session's by `marker` (at the start of
    the first system block after Claude Code's billing header, which vLLM drops), for the served model."""
    body = json.loads(json.dumps(anthropic))
    system = body.get("system") or ""
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
    first = next(i for i, b in enumerate(blocks) if b.get("type") == "text"
                 and not b.get("text", "").startswith("x-anthropic-billing-header"))
    blocks[first] = {**blocks[first], "text": f"[{marker}] Working directory: /home/{marker}/project\n{blocks[first]['text']}"}
    body.update(system=blocks, model=SERVED, max_tokens=MAX_TOKENS, temperature=0, stream=True,
                tools=[t for t in body.get("tools", []) if "input_schema" in t])  # server tools: Anthropic's own
    return body


def session_id(marker: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, marker))  # Claude Code's header holds a UUID


def first_event_s(port: int, body: dict, session: str) -> tuple[int, float | None]:
    """Send one streamed /v1/messages request as Claude Code does; the status and the seconds to its first event
    (None if none came)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    began = time.monotonic()
    try:
        connection.request("POST", "/v1/messages", json.dumps(body),
                           {"content-type": "application/json", "anthropic-version": "2023-06-01",
                            "authorization": f"Bearer {KEY}", "x-claude-code-session-id": session})
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
        return [first_event_s(port, messages_body(turn, marker), session_id(marker)) for turn in turns]
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(SESSIONS) as pool:
        sessions = list(pool.map(one, range(SESSIONS)))
    results = [r for session in sessions for r in session]
    firsts = [first for status, first in results if status == 200 and first is not None]
    failed = [sum(1 for status, first in session if status != 200 or first is None) for session in sessions]
    return {"requests": len(results), "ok": len(firsts), "errors": sorted({s for s, f in results if s != 200 or f is None}),
            "most_failed_in_a_session": max(failed, default=0),
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
            "--gpu-memory-utilization", "0.4", "--kv-cache-memory-bytes", str(KV_CACHE_BYTES),
            "--max-model-len", "40960", "--enforce-eager", "--enable-prefix-caching",
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    # the device has no network: without HF_HUB_OFFLINE vLLM asks the Hub about MODEL and fails on the name lookup
    return subprocess.Popen([*vllm_command(), *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)


def nginx_env(folder: Path) -> dict:
    """nginx's libraries from its folder; not device-env.sh's LD_PRELOAD (NCCL, for vLLM only)."""
    return {**{k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}, "LD_LIBRARY_PATH": str(folder)}


def carried_nginx() -> Path:
    """The nginx that carry_nginx.sh copied, checked to load here."""
    binary = NGINX_DIR / "nginx"
    if not binary.is_file():
        raise RuntimeError(f"no nginx in {NGINX_DIR} (HARNESS_NGINX_DIR): run benchmarks/gpu/carry_nginx.sh "
                           f"{NGINX_DIR} on a machine with nginx, and carry that folder")
    done = subprocess.run([str(binary), "-v"], env=nginx_env(NGINX_DIR), capture_output=True, text=True)
    if done.returncode != 0:
        needed = (NGINX_DIR / "GLIBC_NEEDED").read_text().strip() if (NGINX_DIR / "GLIBC_NEEDED").exists() else "?"
        raise RuntimeError(f"{binary} does not run here ({os.confstr('CS_GNU_LIBC_VERSION')}; it needs {needed}): "
                           f"{done.stderr.strip()[-300:]}")
    return binary


def start_router(round_robin: bool, workers: list[int], nginx: Path, run_dir: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """router.py's configuration for the two servers (config_from_env, render), and nginx started from it as the
    router image starts it (`-p`, `-c`; `-e` too, and LD_LIBRARY_PATH: nothing under /etc/nginx or /var)."""
    port = free_port()
    env = {router.PODS_ENV: " ".join(f"http://127.0.0.1:{w}" for w in workers), router.CLIENT_KEY_ENV: KEY,
           router.PORT_ENV: str(port), router.RUN_DIR_ENV: str(run_dir),
           router.PODS_FILE_ENV: str(run_dir / "no-pods-file")}  # not the router pod's /workspace file
    config = router.config_from_env(env)
    run_dir.mkdir(parents=True, exist_ok=True)
    conf = run_dir / "nginx.conf"
    conf.write_text(router.render(config, round_robin=round_robin))
    process = subprocess.Popen([str(nginx), "-p", str(run_dir), "-c", str(conf), "-e", "stderr"],
                               env=nginx_env(nginx.parent),
                               stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
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
    nginx = carried_nginx()
    ports = [free_port(), free_port()]
    servers = []
    try:
        began = time.monotonic()
        servers = [start_vllm(port, logs / f"router-vllm{i}.log") for i, port in enumerate(ports)]
        for i, port in enumerate(ports):
            up = wait_for(lambda: http_call(port, "GET", "/health", timeout=5)[0] == 200,
                          300 - (time.monotonic() - began), servers[i])
            if not check(f"vLLM server {i} serving", up is not None, f"{round(time.monotonic() - began, 1)} s after both started"):
                return {**figures, "ok": False}
        figures["servers_start_s"] = round(time.monotonic() - began, 1)
        replays = (("one server", None), ("affinity", False), ("round robin", True))
        for label, round_robin in replays:
            if round_robin is None:
                figures[label] = measured(ports, lambda: replay(ports[0], turns, "one"))
                continue
            name = "round-robin" if round_robin else "affinity"
            run_dir = Path(f"/tmp/router-run-{os.getpid()}-{name}")
            process, port = start_router(round_robin, ports, nginx, run_dir, logs / f"router-nginx-{name}.log")
            try:
                ready = wait_for(lambda: http_call(port, "GET", "/health", timeout=5)[0] == 200, 30, process)
                if check(f"the router ({name}) serving, nginx from {nginx.parent}", ready is not None,
                         (logs / f"router-nginx-{name}.log").read_text()[-300:] if ready is None else f"{ready:.1f} s"):
                    figures[label] = measured(ports, lambda: replay(port, turns, name))
            finally:
                stop(process, 10)
                shutil.rmtree(run_dir, ignore_errors=True)
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
