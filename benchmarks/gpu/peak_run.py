"""harness.py peak: the keep-alive bridge at the engine's peak, measured with vLLM's own benchmark client (issue 38).

A pod as users run it (the REAL launcher, the tiny Qwen3, CUDA graphs on, heartbeats, VLLM_API_KEY, Claude Code's
model name renamed by the bridge, idle tracking), then `vllm bench serve` (vLLM 0.27.1's own client, run in this
process from the carried vLLM: `vllm.benchmarks.serve`), random 512-token prompts, 256 output tokens, --ignore-eos,
closed loop at 64 and 256 streams, through the bridge (port 8080) and straight at vLLM's internal port, alternated
after a warm-up; one line per pair. Every run sends prompts of its own (a seed each: vLLM's prefix cache would
serve a later run the earlier one's prompts) and the order turns each round; each run's prefix-cache hit rate is
printed beside it. Chat is vLLM's `openai-chat` backend; /v1/messages is the same client with one
request function added (`anthropic-messages` below: 0.27.1 has none for Anthropic's API), modelled on its
openai-chat one: the first content block delta (text or thinking) is the first token, `message_delta`'s usage the output tokens.

Beside each figure, what each process of the pod spent (CPU seconds per wall second, from /proc: the bridge, vLLM's
API server, its engine core, and this client), and the connections from the bridge to vLLM. With py-spy on PATH
(PEAK_PYSPY=1), the bridge's stacks during the first bridged run go to $OUT/pyspy-bridge.txt (collapsed).

PEAK_STREAMS (default "64,256"), PEAK_APIS (default "chat,messages"), PEAK_ROUNDS (pairs per shape, default 1).
PEAK_BASELINE_BRIDGE=PATH/entrypoint/bridge.py (another checkout's, e.g. main before a change): that bridge too is
started beside the pod's, with the pod bridge's own argv and environment (from /proc) on another port, in front of
the same vLLM, and measured in each round between the pod's bridge and the straight run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

INPUT_LEN, OUTPUT_LEN = 512, 256
PROMPTS_PER_STREAM = 5
CLAUDE_NAME = "claude-opus-5-5"  # what Claude Code 2.1.332 sends: the bridge renames it to the pod's model
Check = Callable[..., bool]


async def anthropic_messages(request_func_input, session, pbar=None):
    """vLLM's openai-chat request function, for POST /v1/messages (Anthropic's streamed events)."""
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput, _update_headers_common

    payload = {"model": request_func_input.model_name or request_func_input.model, "stream": True,
               "max_tokens": request_func_input.output_len,
               "messages": [{"role": "user", "content": request_func_input.prompt}]}
    headers = {"Content-Type": "application/json", "anthropic-version": "2023-06-01"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["x-api-key"] = os.environ["OPENAI_API_KEY"]
    _update_headers_common(headers, request_func_input)
    output = RequestFuncOutput()
    output.prompt_len = request_func_input.prompt_len
    text, ttft = "", 0.0
    began = recent = time.perf_counter()
    output.start_time = began
    try:
        async with session.post(url=request_func_input.api_url, json=payload, headers=headers) as response:
            if response.status != 200:
                output.error = f"{response.status} {response.reason}"
                return output
            buffer = ""
            async for chunk in response.content.iter_any():
                buffer += chunk.decode("utf-8", errors="replace")
                while "\n\n" in buffer:
                    event, buffer = buffer.split("\n\n", 1)
                    data = next((line[5:].strip() for line in event.splitlines() if line.startswith("data:")), None)
                    if not data:
                        continue  # ping, or a comment
                    now = time.perf_counter()
                    message = json.loads(data)
                    kind = message.get("type")
                    if kind == "content_block_delta":  # text, or thinking where the model reasons
                        if ttft == 0.0:
                            ttft = output.ttft = now - began
                        else:
                            output.itl.append(now - recent)
                        text += message["delta"].get("text") or message["delta"].get("thinking") or ""
                        recent = now
                    elif kind == "message_delta":
                        output.output_tokens = (message.get("usage") or {}).get("output_tokens") or 0
            output.generated_text, output.success, output.latency = text, True, recent - began
    except Exception:  # noqa: BLE001 - counted as a failed request, as vLLM's own functions do
        output.error = traceback.format_exc()
    finally:
        if pbar:
            pbar.update(1)
    return output


def register() -> None:
    from vllm.benchmarks.lib import endpoint_request_func

    endpoint_request_func.ASYNC_REQUEST_FUNCS.setdefault("anthropic-messages", anthropic_messages)


def bench(base_url: str, api: str, model: str, served: str, tokenizer: str, streams: int, prompts: int,
          seed: int) -> dict:
    """One `vllm bench serve` run, in this process; its result dict."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    backend, endpoint = ("openai-chat", "/v1/chat/completions") if api == "chat" else \
        ("anthropic-messages", "/v1/messages")
    args = parser.parse_args([
        "--backend", backend, "--base-url", base_url, "--endpoint", endpoint, "--model", model,
        "--served-model-name", served, "--tokenizer", tokenizer, "--dataset-name", "random",
        "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--ignore-eos",
        "--num-prompts", str(prompts), "--max-concurrency", str(streams), "--request-rate", "inf",
        "--ready-check-timeout-sec", "0", "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl",
        "--metric-percentiles", "50,99", "--seed", str(seed)])
    return main(args)


def cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descends_from(pid: int, ancestor: int) -> bool:
    """The launcher starts the bridge and vLLM in sessions of their own: its children by parentage, not group."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def pod_processes(pgid: int) -> dict[str, list[int]]:
    """The launcher's session by role: the bridge, vLLM's API server(s), its engine core(s)."""
    found: dict[str, list[int]] = {"bridge": [], "api_server": [], "engine_core": []}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not descends_from(int(entry.name), pgid):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            comm = (entry / "comm").read_text().strip()
        except (OSError, ProcessLookupError):
            continue
        if any(arg.endswith("bridge.py") for arg in cmdline.split()):
            found["bridge"].append(int(entry.name))
        elif "EngineCor" in comm or "EngineCore" in cmdline:
            found["engine_core"].append(int(entry.name))
        elif "vllm" in cmdline and " serve" in cmdline:
            found["api_server"].append(int(entry.name))
    return found


def connections_to(port: int) -> int:
    """Established TCP connections to 127.0.0.1:port from this host (the bridge's pool to vLLM)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def prefix_hits(vllm_url: str) -> tuple[float, float]:
    """vLLM's prefix-cache counters (tokens queried, tokens found), read straight from its /metrics."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{vllm_url}/metrics", timeout=10) as answer:
            text = answer.read().decode(errors="replace")
    except OSError:
        return 0.0, 0.0
    return prefix_counts(text)


def prefix_counts(metrics: str) -> tuple[float, float]:
    """(tokens queried, tokens found in the prefix cache) from the text of vLLM's /metrics."""
    def total(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))
    return total("vllm:prefix_cache_queries_total"), total("vllm:prefix_cache_hits_total")


def hit_pct(before: tuple[float, float], after: tuple[float, float]) -> float:
    queried = after[0] - before[0]
    return round(100 * (after[1] - before[1]) / queried, 1) if queried else 0.0


def measured(label: str, run: Callable[[], dict], processes: dict[str, list[int]], watch_port: int | None,
             pyspy_to: Path | None) -> dict:
    """Run one benchmark; its figures, with what each process of the pod spent meanwhile."""
    before = {role: sum(cpu_s(p) for p in pids) for role, pids in processes.items()}
    client_before = time.process_time()
    spy = None
    if pyspy_to is not None and processes["bridge"]:
        spy = subprocess.Popen(["py-spy", "record", "--format", "raw", "--rate", "200", "--duration", "8",
                                "--nonblocking", "--pid", str(processes["bridge"][0]), "--output", str(pyspy_to)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    began = time.monotonic()
    peak_connections = 0
    if watch_port:
        import threading

        stop = threading.Event()

        def sample() -> None:
            nonlocal peak_connections
            while not stop.wait(0.5):
                peak_connections = max(peak_connections, connections_to(watch_port))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
    result = run()
    wall = time.monotonic() - began
    if watch_port:
        stop.set()
        sampler.join()
    if spy is not None:
        _, err = spy.communicate(timeout=60)
        if spy.returncode:
            print(f"[gpu] py-spy failed ({spy.returncode}): {err.decode(errors='replace')[-300:]}", flush=True)
    cpu = {role: round((sum(cpu_s(p) for p in pids) - before[role]) / wall, 2) for role, pids in processes.items()}
    cpu["client"] = round((time.process_time() - client_before) / wall, 2)
    figures = {"label": label, "completed": result.get("completed"), "failed": result.get("failed"),
               "output_tok_s": round(result.get("output_throughput") or 0, 1),
               "ttft_p50_ms": round(result.get("p50_ttft_ms") or result.get("median_ttft_ms") or 0, 1),
               "ttft_p99_ms": round(result.get("p99_ttft_ms") or 0, 1),
               "itl_p99_ms": round(result.get("p99_itl_ms") or 0, 2), "wall_s": round(wall, 1),
               "cpu_per_s": cpu}
    if watch_port:
        figures["bridge_to_vllm_connections_max"] = peak_connections
    print(f"[gpu] {json.dumps(figures)}", flush=True)
    return figures


def start_baseline(script: str, pod_bridge: int, check: Check) -> tuple[subprocess.Popen, int] | None:
    """Another checkout's bridge, as the launcher started the pod's (its argv and environment), on a free port."""
    import socket
    import urllib.request

    argv = Path(f"/proc/{pod_bridge}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{pod_bridge}/environ").read_bytes().split(b"\0")
                   if b"=" in item)
    args = [a.decode() for a in argv]
    script_at = next(i for i, a in enumerate(args) if a.endswith("bridge.py"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args[script_at] = script
    args[args.index("--port") + 1] = str(port)
    env = {k.decode(): v.decode() for k, v in environ.items()}
    env["PYTHONPATH"] = ":".join([str(Path(script).parents[1]), env.get("PYTHONPATH", "")])
    process = subprocess.Popen(args, env=env, stdout=open("/tmp/baseline-bridge.log", "w"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    check("baseline bridge started", True, f"{script} on port {port}")
                    return process, port
        except OSError:
            pass
        time.sleep(0.5)
    check("baseline bridge started", False, Path("/tmp/baseline-bridge.log").read_text()[-500:])
    process.kill()
    return None


def run(check: Check, bridge_port: int, vllm_port: int, key: str, model: str, served: str, tokenizer: str,
        pgid: int, out: Path | None) -> dict:
    os.environ["OPENAI_API_KEY"] = key  # vLLM's client sends it; the bridge and vLLM both check it
    register()
    streams = [int(s) for s in os.environ.get("PEAK_STREAMS", "64,256").split(",")]
    apis = os.environ.get("PEAK_APIS", "chat,messages").split(",")
    rounds = int(os.environ.get("PEAK_ROUNDS", "1"))
    processes = pod_processes(pgid)
    check("the pod's processes found", all(processes.values()), json.dumps(processes))
    bridge_url, vllm_url = f"http://127.0.0.1:{bridge_port}", f"http://127.0.0.1:{vllm_port}"
    pyspy = shutil.which("py-spy") if os.environ.get("PEAK_PYSPY") == "1" else None
    # Triton compiles and CUDA graph warm-ups on the first bursts: not counted
    warm = measured("warm-up (straight)", lambda: bench(vllm_url, "chat", model, served, tokenizer, 256, 512, 1),
                    processes, None, None)
    check("warm-up answered every request", warm["failed"] == 0 and warm["completed"] == 512, str(warm["completed"]))
    baseline = None
    if os.environ.get("PEAK_BASELINE_BRIDGE"):
        baseline = start_baseline(os.environ["PEAK_BASELINE_BRIDGE"], processes["bridge"][0], check)
    baseline_processes = {"bridge": [baseline[0].pid] if baseline else [],
                          "api_server": processes["api_server"], "engine_core": processes["engine_core"]}
    pairs = []
    for count in streams:
        for api in apis:
            for round_ in range(rounds):
                prompts = count * PROMPTS_PER_STREAM
                spying = pyspy and round_ == 0 and count == streams[0]
                runs = {"bridge": (bridge_url, CLAUDE_NAME, processes, vllm_port),
                        **({"baseline": (f"http://127.0.0.1:{baseline[1]}", CLAUDE_NAME, baseline_processes, None)}
                           if baseline else {}),
                        "straight": (vllm_url, served, processes, None)}
                # Each run its own prompts (a seed of its own): with one seed for all, the runs after the first
                # found the first's prompts in vLLM's prefix cache, and the bridge, measured first, paid every
                # prefill alone. The order turns each round, so no target is always first after another's load.
                order = list(runs)[round_ % len(runs):] + list(runs)[:round_ % len(runs)]
                figures: dict[str, dict] = {}
                for position, target in enumerate(order):
                    url, name, watched, watch_port = runs[target]
                    seed = 1000 + 100 * round_ + 10 * streams.index(count) + apis.index(api) * 3 + position
                    spy_to = Path(out or "/tmp", f"pyspy-{target}-{api}-{count}.txt") \
                        if spying and target != "straight" else None
                    hits_before = prefix_hits(vllm_url)
                    figures[target] = measured(f"{target} {api} {count}", lambda: bench(
                        url, api, model, name, tokenizer, count, prompts, seed), watched, watch_port, spy_to)
                    figures[target]["prefix_cache_hit_pct"] = hit_pct(hits_before, prefix_hits(vllm_url))
                    figures[target]["order"] = position
                bridged, straight, before = figures["bridge"], figures["straight"], figures.get("baseline")
                ratio = bridged["output_tok_s"] / straight["output_tok_s"] if straight["output_tok_s"] else 0.0
                added = bridged["ttft_p99_ms"] - straight["ttft_p99_ms"]
                pair = {"api": api, "streams": count, "round": round_, "order": order, "ratio": round(ratio, 3),
                        "ttft_p99_added_ms": round(added, 1), "bridge": bridged, "straight": straight}
                if before:
                    pair["baseline"] = before
                    pair["baseline_ratio"] = round(before["output_tok_s"] / straight["output_tok_s"], 3) \
                        if straight["output_tok_s"] else 0.0
                    pair["baseline_ttft_p99_added_ms"] = round(before["ttft_p99_ms"] - straight["ttft_p99_ms"], 1)
                    print(f"[gpu] baseline {api} {count} streams: {before['output_tok_s']:.0f} tok/s, ratio "
                          f"{pair['baseline_ratio']:.3f}; p99 TTFT {pair['baseline_ttft_p99_added_ms']:+.0f} ms; "
                          f"its CPU {before['cpu_per_s'].get('bridge')} s/s", flush=True)
                pairs.append(pair)
                check(f"{api} {count} streams: every request answered both ways",
                      bridged["failed"] == 0 and straight["failed"] == 0
                      and bridged["completed"] == straight["completed"] == prompts,
                      f"{bridged['completed']} / {straight['completed']} of {prompts}")
                print(f"[gpu] pair {api} {count} streams (order {'/'.join(order)}): bridge "
                      f"{bridged['output_tok_s']:.0f} tok/s, straight {straight['output_tok_s']:.0f} tok/s, ratio "
                      f"{ratio:.3f}; p99 TTFT {bridged['ttft_p99_ms']:.0f} / {straight['ttft_p99_ms']:.0f} ms "
                      f"({added:+.0f} ms); prefix-cache hits {bridged['prefix_cache_hit_pct']} / "
                      f"{straight['prefix_cache_hit_pct']} %; bridge CPU {bridged['cpu_per_s'].get('bridge')} s/s, "
                      f"API server {bridged['cpu_per_s'].get('api_server')} s/s "
                      f"(straight {straight['cpu_per_s'].get('api_server')})", flush=True)
    for pair in pairs:  # the goal (issue 38), reported per pair; a miss is a failed check, not a harness error
        check(f"goal {pair['api']} {pair['streams']}: >= 0.98x and <= +20 ms p99 TTFT",
              pair["ratio"] >= 0.98 and pair["ttft_p99_added_ms"] <= 20,
              f"{pair['ratio']:.3f}x, {pair['ttft_p99_added_ms']:+.0f} ms")
    if baseline:
        baseline[0].terminate()
        baseline[0].wait(timeout=30)
    return {"pairs": pairs, "warm_up": warm, "processes": processes}


if __name__ == "__main__":  # the request function alone, against any server (no pod started)
    parser = argparse.ArgumentParser(description="one vllm bench serve run with the anthropic-messages function")
    parser.add_argument("base_url")
    parser.add_argument("--api", default="messages", choices=["chat", "messages"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--streams", type=int, default=8)
    options = parser.parse_args()
    register()
    print(json.dumps(bench(options.base_url, options.api, options.model, options.model, options.tokenizer,
                           options.streams, options.streams * 2, 0), default=str)[:2000])
    sys.exit(0)
