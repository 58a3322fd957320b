"""The launcher and vLLM on a real GPU, checked through the bridge (docs/measurements.md, "A real GPU in the loop").

On the H200 device, after device-setup.sh (the image's Python stack in /root/site, a tiny Qwen3 in
/root/hf), from the repository root:

    python3 benchmarks/gpu/harness.py RUN [RUN...]     RUN: dense | dense-v2 | moe | swap | start-cache-tiny | ...
    python3 benchmarks/gpu/harness.py --list           every run's name (registry() below), one a line

Each run installs the project's vLLM plugin into /root/site as the image does
(templates/files/install_plugin.py's wheel), starts the REAL launcher (entrypoint/launch.py) in its
own session with a hopper marker, the real nvidia-smi and HF_HOME=/root/hf, then checks through the
bridge on 127.0.0.1:8080: /v1/models, chat (non-streaming, streaming), /v1/messages with every
Claude Code thinking shape (prebake/incontainer/programs/thinking_cases.py), the status page, and a
SIGTERM stop that frees the GPU. One line per check; the figures as JSON on the last line and in
$OUT/gpu-RUN.json when $OUT is set. Each run collects its own checks (checks.py); the other runs' modules sit beside
this one in the package benchmarks.gpu.

  dense     tiny Qwen3 (Qwen3ForCausalLM: vLLM's own choice is its V2 runner), launcher defaults
  dense-v2  the same with VLLM_USE_V2_MODEL_RUNNER=1 set by the user: V2, no thinking budgets
  moe       a tiny Qwen3-MoE config (Qwen3MoeForCausalLM: vLLM's own choice is V1), dummy weights
  swap      VL_SWAP with sleep mode: an 8B-like and a 4B-like Qwen3 (dummy weights, mkmodel.py's configs),
            each started once; then swaps back and forth, each timed from the request naming the other model
            to its first token, the GPU's memory with one asleep, the development endpoints refused
  swap-l2   the same with VL_SWAP_SLEEP=2 and real weights (the tiny Qwen3 and a copy of it): each wake
            reloads the weights from disk
  swap-ngram  as swap, with ngram speculative decoding (VL_SPEC=ngram) on both models
  router    two plain vLLM servers of the tiny Qwen3 behind the router pod's nginx (routerpod/router.py's
            configuration): a dozen concurrent Claude Code-shaped sessions on /v1/messages, prefix-cache hit rate
            and TTFT with session affinity, round robin, and one server (benchmarks/gpu/router_run.py; nginx
            from .whl/nginx, copied there by benchmarks/gpu/carry_nginx.sh)
  start-cache-tiny, start-cache-8b  a new pod (empty cache folder) cold, then a second new pod with the compile
            cache restored from a Hub stand-in (prebake_testing/hub.py, in this process: the device has no network;
            VL_CACHE_REPO, HF_TOKEN, HF_ENDPOINT) that the first one published: for the tiny Qwen3 and the 8B-like
            dummy-weight model, seconds from the launcher's start to /health, and to the first token of a Claude
            Code-shaped /v1/messages request sent at the launcher's start and held by the bridge (VL_START_HOLD).
            Compiled (no --enforce-eager). One device call each (about 4 and 5 minutes).
  catalogue [KEY...]  every catalogue model (entrypoint/models.toml) scaled down, dummy weights, its real flags, through
            the real launcher in turn (benchmarks/gpu/catalogue_run.py); a Blackwell-only entry is checked refused
  tp2, dp2, swap-tp2, router-2pods, bench-pair  two GPUs of one host, for the nvidia-h200-x2 kind (issue 50,
            benchmarks/gpu/pair_runs.py): tensor and data parallel with NCCL's settings read from the workers, swaps at
            TP 2, the router with one server per GPU and one killed mid-session, `vllm bench serve` TP 2/TP 1/DP 2
  peak      the bridge at the engine's peak (issue 38, benchmarks/gpu/peak_run.py): the tiny Qwen3 with CUDA graphs,
            vLLM's own `vllm bench serve` through the bridge and straight at vLLM, alternated after a warm-up, chat and
            /v1/messages at 64 and 256 streams, with each process's CPU use; one line per pair
"""

from __future__ import annotations

import functools
import json
import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
if __name__ == "__main__" and not __package__:
    # The one path set-up: the GPU machine runs this file from a plain checkout (nothing of it installed, PYTHONPATH
    # is the image's stack only), so the repository's packages come from its root, in place of this script's own
    # folder, whose module names would shadow.
    sys.path[0] = str(REPO)

from benchmarks.gpu import catalogue_run, pair_runs, procwatch, profile_summary  # noqa: E402
from benchmarks.gpu import peak_run as peak, router_run as routing  # noqa: E402
from benchmarks.gpu.checks import Checks  # noqa: E402
from benchmarks.gpu.peak_run import prefix_counts  # noqa: E402
from benchmarks.gpu.start_phases import milestones, phases, table as phase_table  # noqa: E402
from prebake.incontainer.programs.thinking_cases import CASES  # noqa: E402

SITE, HF, PKG = Path("/root/site"), Path("/root/hf"), Path("/root/pkg")
PORT = 8080  # the launcher's default VL_PORT
BRIDGE = f"http://127.0.0.1:{PORT}"
KEY = "gpu-harness-key"
# Budgets scaled to max_tokens 512 (a 4096-token context): every thinking shape carries one.
BUDGETS = "minimal=16 low=32 medium=64 high=128 xhigh=256 max=384 adaptive=128"
MAX_TOKENS = 512
HOPPER_MARKER = {"schema": 1, "variant": "hopper", "cuda": "13.0", "cuda_arch": "9.0", "cuda_compat_dir": None,
                 "vllm": "0.27.1", "torch": "2.13.0", "revision": "gpu-harness",
                 "launch_defaults": {"VL_MODEL": "ornith", "VL_FLASHINFER": "off"}}
RUNS = {
    "dense": {"model": "tiny/qwen3", "env": {}, "args": [], "runner": "V1", "budgets": True},
    "dense-v2": {"model": "tiny/qwen3", "env": {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "args": [], "runner": "V2",
                 "budgets": False},
    "moe": {"model": "tiny/qwen3moe", "env": {"VL_HFOFFLINE": "on"}, "args": ["--load-format", "dummy"],
            "runner": "V1", "budgets": True},
}


def install_plugin(check: Checks) -> None:
    """The wheel the image build installs (install_plugin.py), into /root/site."""
    # templates/files/ is the image build's folder of loose files, no package: its script read as the build runs it
    build_wheel = runpy.run_path(str(REPO / "templates" / "files" / "install_plugin.py"))["build_wheel"]
    wheel = build_wheel(str(REPO / "entrypoint" / "vllm_plugin"), "/tmp")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--upgrade",
                           "--target", str(SITE), wheel], capture_output=True, text=True)
    check("plugin installed into /root/site", done.returncode == 0, (done.stderr or "")[-300:])


def make_moe() -> None:
    """A tiny Qwen3-MoE: config and tokenizer in an HF cache layout, no weights (--load-format dummy)."""
    rev = "fedcba9876543210fedcba9876543210fedcba98"
    repo = HF / "hub" / "models--tiny--qwen3moe"
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
              "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 256,
              "intermediate_size": 512, "moe_intermediate_size": 128, "num_experts": 8, "num_experts_per_tok": 2,
              "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
              "max_position_embeddings": 40960, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
              "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 151936, "use_cache": True}
    (snap / "config.json").write_text(json.dumps(config, indent=1))
    tiny = next((HF / "hub" / "models--tiny--qwen3" / "snapshots").iterdir())
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        shutil.copy(tiny / name, snap / name)


def make_repo(repo_id: str, folder: Path) -> None:
    """An HF cache layout for repo_id from a folder of config and tokenizer files (mkmodel.py's /root/m8b...)."""
    rev = "0123456789abcdef0123456789abcdef" + repo_id.encode().hex()[:8].ljust(8, "0")
    repo = HF / "hub" / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    for item in folder.iterdir():
        shutil.copy(item, snap / item.name)


def swap_status() -> dict:
    with request("GET", "/prebake/status") as answer:
        return json.loads(answer.read()).get("swap") or {}


def first_token_s(model: str) -> tuple[int, float | None, str]:
    """One streamed chat request naming `model`: (status, seconds to its first token, who answered)."""
    began = time.monotonic()
    answer = request("POST", "/v1/chat/completions", {"model": model, "stream": True, "max_tokens": 8,
                                                      "messages": [{"role": "user", "content": "Say hi."}]},
                     timeout=300)
    events, first = sse_events(answer, began)
    who = next((e.get("model") for e in events if e.get("model")), "?")
    return answer.status, first, who


SWAP_RUNS = {
    "swap": {"models": {"m8b": "/root/m8b", "m4b": "/root/m4b"}, "level": "1", "env": {},
             "args": ["--load-format", "dummy"]},
    "swap-l2": {"models": {"qwen3": None, "qwen3b": "tiny"}, "level": "2", "env": {}, "args": []},
    "swap-ngram": {"models": {"m8b": "/root/m8b", "m4b": "/root/m4b"}, "level": "1", "env": {"VL_SPEC": "ngram"},
                   "args": ["--load-format", "dummy"]},
}


def end_session(process: subprocess.Popen) -> int:
    """SIGTERM to the launcher's session, SIGKILL after 120 s; its exit code."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:  # the launcher already exited: its code is checked by the caller
        pass
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait()


def stop_pod(check: Checks, process: subprocess.Popen, baseline: int, figures: dict, label: str) -> None:
    """SIGTERM to the launcher's session; checks its exit and that the GPU's memory is back to `baseline` with no
    compute process left. figures gets stop_s and gpu_mib (before, serving, after)."""
    serving = gpu_used_mib()
    stop = time.monotonic()
    code = end_session(process)
    figures["stop_s"] = round(time.monotonic() - stop, 1)
    after = gpu_used_mib()
    for _ in range(20):
        if after <= baseline + 512:
            break
        time.sleep(0.5)
        after = gpu_used_mib()
    figures["gpu_mib"] = {"before": baseline, "serving": serving, "after": after}
    apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()
    check(label, code is not None, f"exit {code} in {figures['stop_s']} s")
    check("GPU memory freed (nvidia-smi)", after <= baseline + 512 and not apps,
          f"{baseline} -> {serving} -> {after} MiB; compute apps: {apps or 'none'}")


def swap_run(name: str) -> dict:
    check = Checks()
    run = SWAP_RUNS[name]
    figures: dict = {"run": name}
    tiny = next((HF / "hub" / "models--tiny--qwen3" / "snapshots").iterdir())
    for model, folder in run["models"].items():
        if folder is not None:  # None: already in the cache (tiny/qwen3)
            make_repo(f"tiny/{model}", tiny if folder == "tiny" else Path(folder))
    first, second = list(run["models"])
    env = pod_env(f"tiny/{first}", Path(f"/root/cache-{name}"), {
        "VL_SWAP": f"{second}:tiny/{second}", "VL_SWAP_SLEEP": run["level"], "VL_HFOFFLINE": "on", "VL_UTIL": "0.5",
        **run["env"]})
    args = [*run["args"], "--max-model-len", "4096", "--enforce-eager"]
    launch = [sys.executable, str(REPO / "entrypoint" / "launch.py")]
    dry = subprocess.run([*launch, "--dry-run", *args], env=env, capture_output=True, text=True)
    plan = json.loads(dry.stdout) if dry.returncode == 0 else {}
    decided = {d["topic"]: d["decision"] for d in plan.get("decisions", [])}
    check("launcher --dry-run", decided.get("swap-mode") == f"sleep level {run['level']}",
          str(decided.get("swap-mode")) if plan else dry.stderr[-300:])
    baseline = gpu_used_mib()
    began = time.monotonic()
    log = open(f"/tmp/launcher-{name}.log", "w")
    process = subprocess.Popen([*launch, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    serving = wait_serving(process, 420)
    figures["start_to_first_health_s"] = None if serving is None else round(serving, 1)
    warm = None
    while serving is not None and time.monotonic() - began < 540 and process.poll() is None:
        state = swap_status()
        if state.get("models") == {first: "awake", second: f"asleep (level {run['level']})"} \
                and not state.get("target"):
            warm = time.monotonic() - began
            break
        time.sleep(0.5)
    figures["start_to_both_started_s"] = None if warm is None else round(warm, 1)
    if check(f"both models started once, {first} awake, {second} asleep", warm is not None,
             f"{figures['start_to_both_started_s']} s"):
        figures["gpu_used_one_asleep_mib"] = gpu_used_mib()
        times = []
        for model in (second, first) * 3:
            status, first, who = first_token_s(model)
            times.append(None if first is None else round(first, 3))
            check(f"swap to {model}: first token", status == 200 and who == model and first is not None,
                  f"{status}, answered by {who}, {times[-1]} s")
        figures["swap_to_first_token_s"] = times
        first_token_s(first)  # loaded: the next one is timed without a swap
        _, unswapped, _ = first_token_s(first)
        figures["no_swap_first_token_s"] = None if unswapped is None else round(unswapped, 3)
        state = swap_status()
        figures["last_swaps"] = state.get("last_swaps")
        check("every swap by sleep and wake (no restart)", all(s["how"] == f"sleep level {run['level']} + wake"
                                                               for s in state.get("last_swaps") or [None]),
              json.dumps([(s["to"], s["seconds"], s["how"]) for s in state.get("last_swaps") or []]))
        measured = [t for t in times if t is not None]
        check("swap to first token at most 2 s", measured and max(measured) <= 2.0, f"max {max(measured or [0])} s")
        refused = request("POST", "/sleep?level=1", {})
        check("POST /sleep through the bridge refused", refused.status == 403, str(refused.status))
    stop_pod(check, process, baseline, figures, "SIGTERM stops both vLLMs")
    figures["checks"] = list(check.lines)
    figures["ok"] = all(item["ok"] for item in check.lines)
    log.close()
    out = os.environ.get("OUT")
    if out:
        Path(out, f"gpu-{name}.json").write_text(json.dumps(figures, indent=1))
        shutil.copy(f"/tmp/launcher-{name}.log", Path(out, f"launcher-{name}.log"))
        for found in Path(f"/root/cache-{name}").glob("prebake/*/vllm.log"):
            shutil.copy(found, Path(out, f"vllm-{name}.log"))
    return figures


START_CACHE_RUNS = {
    "start-cache-tiny": {"model": "tiny/qwen3", "folder": None, "util": "0.30", "args": []},
    "start-cache-8b": {"model": "tiny/m8b", "folder": "/root/m8b", "util": "0.50", "args": ["--load-format", "dummy"]},
}
HUB_REPO = "gpu-harness/compile-cache"
HUB_TOKEN = "hf_GpuHarnessPlantedToken0123456789"
CLAUDE_TOOLS = [{"name": name, "description": f"{name}: " + "Use this tool when the task needs it. " * 12,
                 "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]}}
                for name in ("Bash", "Read", "Edit", "Write", "Glob", "Grep", "Task", "TodoWrite")]


def claude_code_body() -> dict:
    """A Claude Code 2.1.x request as it sends one (DESIGN.md): its own model name, which the bridge renames to the
    pod's model, sized for the 4096-token context: tools, system
    blocks (its billing block first), adaptive thinking, effort, streaming, max_tokens 32000 (the plugin lowers it)."""
    return {"model": "claude-opus-5-5", "max_tokens": 32000, "stream": True,
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332; cc_entrypoint=cli"},
                       {"type": "text", "text": "You are Claude Code, a coding agent. " * 40}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "List the files here, then say hi."}]}],
            "tools": CLAUDE_TOOLS, "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"},
            "metadata": {"user_id": "gpu-harness"}}


def held_first_token(began: float, result: dict, deadline_s: float) -> None:
    """Sent at the launcher's start: connects as soon as the bridge listens (the restore runs before it), is held
    while vLLM starts, and records the seconds from `began` to its first content delta; then leaves."""
    import http.client

    body = json.dumps(claude_code_body()).encode()
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", "anthropic-version": "2023-06-01",
               "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,effort-2025-11-24",
               "X-Claude-Code-Session-Id": "gpu-harness"}
    while time.monotonic() - began < deadline_s:
        connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=deadline_s)
        try:
            connection.request("POST", "/v1/messages?beta=true", body=body, headers=headers)
        except OSError:
            connection.close()
            time.sleep(0.2)
            continue
        result["sent_s"] = round(time.monotonic() - began, 1)
        try:
            answer = connection.getresponse()
            result["status"] = answer.status
            pings = 0
            for raw in answer:
                line = raw.decode(errors="replace").strip()
                pings += line == "event: ping"
                if line.startswith("data:") and '"error"' in line:
                    result["error"] = line[:300]
                    break
                if line.startswith("data:") and '"content_block_delta"' in line:
                    result["first_token_s"] = round(time.monotonic() - began, 1)
                    break
            result["heartbeats"] = pings
        except OSError as err:
            result["error"] = f"{type(err).__name__}: {err}"
        finally:
            connection.close()
        return


def profile_api_server(check: Checks, server: int | None, out: str) -> subprocess.Popen | None:
    """PREBAKE_START_PYSPY=1: py-spy (wheels.txt) samples vLLM's API server and its engine core (a child:
    --subprocesses) from their first second; procwatch finds the API server, not the bridge beside it."""
    binary = shutil.which("py-spy")
    if binary is None or server is None:
        check("py-spy attached to vLLM's API server", False, "no py-spy on PATH" if not binary else "no vllm serve")
        return None
    return subprocess.Popen([binary, "record", "--pid", str(server), "--subprocesses", "--nonblocking", "--rate", "50",
                             "--duration", "240", "--format", "speedscope", "--output", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_cache_pod(check: Checks, name: str, pod: str, model: str, env: dict, args: list[str], figures: dict) -> None:
    """One new pod: an empty cache folder, the launcher started, a held request, /health, the status page's
    compile-cache block, the publish (cold phase), then a SIGTERM stop. `pod`: cold, restored, or restored-spawn
    (vLLM's engine core spawned, as `vllm serve` does unless told: the before of issue 54), with #N for repeats."""
    import threading

    kind = pod.split("#")[0]
    phase = kind.split("-")[0]
    label = pod.replace("#", "-")
    cache = Path(f"/root/{name}-{label}")
    shutil.rmtree(cache, ignore_errors=True)
    env = {**env, "VL_CACHE_ROOT": str(cache)}
    if kind.endswith("-spawn"):
        env["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
    launch = [sys.executable, str(REPO / "entrypoint" / "launch.py")]
    baseline = gpu_used_mib()
    log = open(f"/tmp/launcher-{name}-{label}.log", "w")
    launched = time.time()  # vLLM's log stamps are wall-clock: the phases are read against it
    began = time.monotonic()
    process = subprocess.Popen([*launch, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    watch = procwatch.EngineCoreWatch(process.pid)
    watch.start()
    profile = f"/tmp/pyspy-{name}-{label}.json"
    spy = None
    if os.environ.get("PREBAKE_START_PYSPY") == "1":
        watch.found_server.wait(60)
        spy = profile_api_server(check, watch.server, profile)
    held: dict = {}
    client = threading.Thread(target=held_first_token, args=(began, held, 420), daemon=True)
    client.start()
    serving = wait_serving(process, 420)
    client.join(120)
    result = {"health_s": None if serving is None else round(serving, 1), **held}
    check(f"{pod}: launcher start to /health 200", serving is not None, f"{result['health_s']} s")
    check(f"{pod}: Claude Code-shaped request sent at the start, held, first token",
          held.get("status") == 200 and held.get("first_token_s") is not None,
          f"sent at {held.get('sent_s')} s, status {held.get('status')}, {held.get('heartbeats')} heartbeat(s), "
          f"first token {held.get('first_token_s')} s {held.get('error', '')}")
    state: dict = {}
    deadline = time.monotonic() + 240
    while serving is not None and time.monotonic() < deadline and process.poll() is None:
        try:
            with request("GET", "/prebake/status") as answer:
                state = (json.loads(answer.read()) if answer.status == 200 else {}).get("compile_cache") or {}
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if phase == "restored" or (state.get("publish") or {}).get("state") in ("published", "failed", "not published"):
            break
        time.sleep(1.0)
    result["restore"] = state.get("restore")
    result["publish"] = state.get("publish")
    want = "cold" if phase == "cold" else "restored"
    check(f"{pod}: the status page says the compile cache was {want}",
          (state.get("restore") or {}).get("state") == want, json.dumps(state.get("restore"))[:300])
    if phase == "cold":
        check("cold: published to the Hub stand-in after /health", (state.get("publish") or {}).get("state") == "published",
              json.dumps(state.get("publish"))[:300])
    vllm_logs = list(cache.glob("prebake/*/vllm.log"))
    text = vllm_logs[0].read_text(errors="replace") if vllm_logs else ""
    result["vllm_log"] = [line.strip()[-200:] for line in text.splitlines()
                          if re.search(r"torch\.compile took|Directly load|Compiling a graph|Graph capturing finished|"
                                       r"init engine .* took|Loading weights took|Dynamo bytecode transform", line)][:12]
    # Triton's kernels travel in the archive (TRITON_CACHE_DIR inside torch_compile_cache/, docs/caches.md): a
    # restored start finds every cubin torch asks for, and compiles none (the archive never carries .ptx, so one in
    # the restored folder was compiled during this start).
    cubins = [line.strip()[-300:] for line in text.splitlines()
              if re.search(r"Cubin file saved by TritonBundler not found|Failed to reload cubin", line)]
    compiled = sorted({path.stem for path in (cache / "vllm" / "torch_compile_cache" / "triton").glob("*/*.ptx")})
    result["triton"] = {"cubins_missing": len(cubins), "first_missing": cubins[:2], "compiled": compiled[:12]}
    if phase == "restored":
        check(f"{pod}: no 'Cubin file ... not found' in vLLM's log", not cubins, "; ".join(cubins[:2]))
        check(f"{pod}: Triton compiled no kernel (no .ptx written)", not compiled, ", ".join(compiled)[:300])
    result["start_method"] = start_method_seen(text, env)
    result["milestones"] = milestones(text, launched, {"API server set-up": watch.engine_core_started})
    result["phases"] = phases(result["milestones"], result.get("first_token_s"))
    figures[pod] = result
    stop_pod(check, process, baseline, result, f"{pod}: SIGTERM stop")
    log.close()
    if spy is not None:
        try:
            spy.wait(60)  # it writes the profile once vLLM has exited
        except subprocess.TimeoutExpired:
            spy.kill()
    if os.path.exists(profile):
        result["profile"] = profile_summary.summarise(json.loads(Path(profile).read_text()))
    out = os.environ.get("OUT")
    if out:
        if os.path.exists(profile):
            shutil.copy(profile, Path(out, os.path.basename(profile)))
        shutil.copy(f"/tmp/launcher-{name}-{label}.log", Path(out, f"launcher-{name}-{label}.log"))
        for found in vllm_logs:
            shutil.copy(found, Path(out, f"vllm-{name}-{label}.log"))


def start_method_seen(vllm_log: str, env: dict) -> str:
    """The engine core's start method: what the launcher gave vLLM, or spawn where vLLM says it forced it."""
    if "Overriding VLLM_WORKER_MULTIPROC_METHOD to 'spawn'" in vllm_log:
        return "spawn (forced by vLLM: " + vllm_log.split("Reasons: ", 1)[-1].splitlines()[0][:120] + ")"
    return env.get("VLLM_WORKER_MULTIPROC_METHOD") or "the launcher's (fork)"



START_GOALS = {"start-cache-8b": {"cold": 90, "restored": 45}, "start-cache-tiny": {"restored": 35}}


def bake_modelinfos(check: Checks, on: bool) -> str:
    """vLLM's model-info cache where the checkout's launcher copies it from (entrypoint/launcher/modelinfos.py
    BAKED_DIR), made as the image build makes it; or none, for the figures without it. PREBAKE_START_BAKED=0: none."""
    folder = REPO / "modelinfos"
    shutil.rmtree(folder, ignore_errors=True)
    if not on:
        return "none (PREBAKE_START_BAKED=0)"
    done = subprocess.run([sys.executable, str(REPO / "templates" / "files" / "modelinfo_bake.py"), str(folder),
                           "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"], capture_output=True, text=True)
    check("model-info cache baked as the image build does", done.returncode == 0, done.stdout.strip()[-300:]
          or done.stderr.strip()[-300:])
    return "baked"


def start_cache_run(name: str) -> dict:
    from prebake_testing.hub import Hub

    check = Checks()
    run = START_CACHE_RUNS[name]
    figures: dict = {"run": name, "model": run["model"],
                     "modelinfos": bake_modelinfos(check, os.environ.get("PREBAKE_START_BAKED", "1") != "0")}
    if run["folder"]:
        make_repo(run["model"], Path(run["folder"]))
    marker = Path("/root/hopper_marker.json")
    marker.write_text(json.dumps(HOPPER_MARKER))
    hub = Hub()
    hub.create(HUB_REPO)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VL_", "HF_HUB_OFFLINE"))}
    env.update({"VL_PREBAKED_MARKER": str(marker), "HF_HOME": str(HF), "VL_MODEL": run["model"], "VL_HFOFFLINE": "on",
                "VLLM_API_KEY": KEY, "VL_UTIL": run["util"], "VL_EFFORT_BUDGETS": BUDGETS,
                "VL_CACHE_REPO": HUB_REPO, "HF_TOKEN": HUB_TOKEN, "HF_ENDPOINT": hub.url, "VL_PORT": str(PORT)})
    args = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--max-model-len", "4096", *run["args"]]
    dry = subprocess.run([sys.executable, str(REPO / "entrypoint" / "launch.py"), "--dry-run", *args], env=env,
                         capture_output=True, text=True)
    plan = json.loads(dry.stdout) if dry.returncode == 0 else {}
    decided = {d["topic"]: d["decision"] for d in plan.get("decisions", [])}
    check("launcher --dry-run: compile-cache decision", decided.get("compile-cache", "").startswith("restore "),
          decided.get("compile-cache", dry.stderr[-300:]))
    pods = os.environ.get("PREBAKE_START_PODS", "cold,restored").split(",")
    if pods[:1] != ["cold"] or not all(kind.split("#")[0] in ("restored", "restored-spawn") for kind in pods[1:]):
        raise SystemExit(f"PREBAKE_START_PODS={','.join(pods)}: cold first, then restored or restored-spawn pods")
    seen: dict[str, int] = {}
    try:
        for kind in pods:
            seen[kind] = seen.get(kind, 0) + 1
            start_cache_pod(check, name, kind if seen[kind] == 1 else f"{kind}#{seen[kind]}", run["model"], env, args,
                            figures)
            if out := os.environ.get("OUT"):  # each pod's figures as soon as it ends: a call cut short keeps them
                Path(out, f"gpu-{name}.json").write_text(json.dumps(figures, indent=1))
        path = (plan.get("compile_cache") or {}).get("path_in_repo", "")
        archive = hub.get(HUB_REPO, path) or b""
        figures["archive_mib"] = round(len(archive) / 2**20, 1)
        secret_free = HUB_TOKEN.encode() not in archive and all(
            HUB_TOKEN not in log.read_text(errors="replace") for log in Path("/tmp").glob(f"launcher-{name}-*.log"))
        check("the token is in no log and not in the archive", secret_free, f"archive {figures['archive_mib']} MiB")
        # the goals of a new pod's start: first token within these seconds of the launcher's start
        for phase, limit in START_GOALS[name].items():
            firsts = sorted(pod["first_token_s"] for key, pod in figures.items() if key.split("#")[0] == phase
                            and isinstance(pod, dict) and pod.get("first_token_s") is not None)
            median = firsts[len(firsts) // 2] if firsts else None
            check(f"{run['model']}: first token within {limit} s of the start ({phase}, median of {len(firsts)})",
                  median is not None and median <= limit, f"{firsts} s")
    finally:
        hub.stop()
    figures["checks"] = list(check.lines)
    figures["ok"] = all(item["ok"] for item in check.lines)
    print(phase_table([figures]))  # several runs: start_phases.py over their gpu-<run>.json files gives the medians
    out = os.environ.get("OUT")
    if out:
        Path(out, f"gpu-{name}.json").write_text(json.dumps(figures, indent=1))
    return figures


def gpu_used_mib() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return int(out.split()[0])


def request(method: str, path: str, body: dict | None = None, timeout: float = 60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BRIDGE + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as err:
        return err


def wait_serving(process, limit_s: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        if process.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(BRIDGE + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return time.monotonic() - began
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return None


def sse_events(answer, began: float) -> tuple[list[dict], float | None]:
    """(events, seconds to the first content delta) of a streamed answer."""
    events, first = [], None
    for raw in answer:
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            events.append({"type": "unparsed", "raw": line[:200]})
            continue
        events.append(event)
        delta = event.get("delta") or ((event.get("choices") or [{}])[0].get("delta") or {})
        if first is None and any(delta.get(k) for k in ("text", "thinking", "content", "reasoning_content",
                                                          "reasoning")):
            first = time.monotonic() - began
    return events, first


def chat_checks(check: Checks, name: str, figures: dict) -> str:
    with request("GET", "/v1/models") as answer:
        models = json.loads(answer.read()) if answer.status == 200 else {}
    served = [m["id"] for m in models.get("data", [])]
    check("GET /v1/models", bool(served), " ".join(served))
    body = {"model": served[0] if served else name, "max_tokens": 32,
            "messages": [{"role": "user", "content": "Say hello."}]}
    began = time.monotonic()
    with request("POST", "/v1/chat/completions", body) as answer:
        payload = answer.read().decode(errors="replace")
        figures["chat_s"] = round(time.monotonic() - began, 3)
        try:
            choices = json.loads(payload).get("choices") if answer.status == 200 else None
        except ValueError:
            choices = None
        check("chat, not streaming", bool(choices), f"{answer.status} in {figures['chat_s']} s")
    began = time.monotonic()
    with request("POST", "/v1/chat/completions", {**body, "stream": True}) as answer:
        events, first = sse_events(answer, began) if answer.status == 200 else ([], None)
        figures["chat_first_token_s"] = None if first is None else round(first, 3)
        check("chat, streaming", answer.status == 200 and bool(events) and first is not None,
              f"{answer.status}, {len(events)} events, first token {figures['chat_first_token_s']} s")
    for effort in ("none", "medium"):
        with request("POST", "/v1/chat/completions", {**body, "reasoning_effort": effort}) as answer:
            text = answer.read().decode(errors="replace")
            check(f"chat, reasoning_effort {effort}", answer.status == 200, f"{answer.status} {text[:160] if answer.status != 200 else ''}")
    return body["model"]


def messages_checks(check: Checks, served: str, figures: dict) -> None:
    firsts = []
    for case, api, body, expect, _ in CASES:
        body = json.loads(json.dumps(body))
        body["model"] = served
        body["max_tokens"] = min(body["max_tokens"], MAX_TOKENS)
        path = "/v1/messages" if api == "messages" else "/v1/chat/completions"
        began = time.monotonic()
        with request("POST", path, body, timeout=120) as answer:
            if body.get("stream"):
                events, first = sse_events(answer, began) if answer.status == 200 else ([], None)
                errors = [e for e in events if e.get("type") == "error" or "error" in e]
                if answer.status != 200:
                    errors = [{"body": answer.read().decode(errors="replace")[:300]}]
                stopped = any(e.get("type") == "message_stop" for e in events) or api == "chat"
                kinds = sorted({(e.get("content_block") or {}).get("type") for e in events
                                if e.get("type") == "content_block_start"} - {None})
                if first is not None:
                    firsts.append(first)
                check(f"{api}: {case}", answer.status == 200 and not errors and stopped,
                      f"{answer.status}, blocks {kinds}, first token "
                      f"{None if first is None else round(first, 3)} s{', error ' + json.dumps(errors[0])[:300] if errors else ''}")
                thought = [e for e in events if (e.get("delta") or {}).get("type") == "thinking_delta"]
                if api == "messages" and expect == ("off",):  # Anthropic's API: no `thinking` or disabled, no thinking
                    check(f"{api}: {case}: no thinking", "thinking" not in kinds and not thought, f"blocks {kinds}")
                if (body.get("thinking") or {}).get("display") in ("omitted", "updates"):  # blocks without their text
                    check(f"{api}: {case}: thinking text omitted", not thought, f"{len(thought)} thinking_delta events")
            else:
                text = answer.read().decode(errors="replace")
                check(f"{api}: {case}", answer.status == 200, f"{answer.status}{' ' + text[:300] if answer.status != 200 else ''}")
    figures["messages_first_token_s"] = [round(x, 3) for x in sorted(firsts)[:1] + sorted(firsts)[-1:]]


FILLER = "The quick brown fox jumps over the lazy dog near the river bank. "
CONTEXT = 4096  # --max-model-len below


def count_tokens(served: str, messages: list, **extra) -> int | None:
    with request("POST", "/v1/messages/count_tokens", {"model": served, "messages": messages, **extra}) as answer:
        return json.loads(answer.read()).get("input_tokens") if answer.status == 200 else None


def prefix_counters() -> tuple[float, float]:
    """vLLM's prefix-cache counters (tokens queried, tokens found in the cache), read through the bridge."""
    with request("GET", "/metrics") as answer:
        return prefix_counts(answer.read().decode(errors="replace"))


def messages(served: str, body: dict, timeout: float = 120) -> tuple[int, dict]:
    with request("POST", "/v1/messages", {"model": served, "thinking": {"type": "disabled"}, **body},
                 timeout=timeout) as answer:
        raw = answer.read().decode(errors="replace")
    try:
        return answer.status, json.loads(raw)
    except ValueError:
        return answer.status, {"raw": raw[:300]}


def session_checks(check: Checks, served: str, figures: dict) -> None:
    """What a long Claude Code session meets (issues 26, 27), on the real engine: Claude Code's own model name,
    a prompt near the context with its max_tokens 64000, a prompt over it, and an inline system message that
    must not make vLLM prefill the earlier conversation again."""
    hi = [{"role": "user", "content": "hi"}]
    status, body = messages("claude-opus-4-8", {"max_tokens": 8, "messages": hi})
    check("messages: Claude Code's own name claude-opus-4-8", status == 200, f"{status} model {body.get('model')}")
    per_unit = (count_tokens(served, [{"role": "user", "content": FILLER * 100}]) or 1400) / 100
    units = int((CONTEXT - 60) / per_unit)
    near = [{"role": "user", "content": FILLER * units}]
    near_tokens = count_tokens(served, near)
    status, body = messages(served, {"max_tokens": 64000, "messages": near})
    usage = body.get("usage") or {}
    used = (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0)
    figures["near_limit"] = {"prompt": near_tokens, "usage": usage, "stop_reason": body.get("stop_reason")}
    check("messages: prompt fits, max_tokens 64000 lowered", status == 200 and 0 < used <= CONTEXT
          and body.get("stop_reason") in ("max_tokens", "end_turn"),
          f"{status}, prompt {near_tokens}, usage {usage}, stop {body.get('stop_reason')} {body.get('raw', '')}")
    over = [{"role": "user", "content": FILLER * int(units * 1.3)}]
    over_tokens = count_tokens(served, over)
    status, body = messages(served, {"max_tokens": 64000, "messages": over})
    error = body.get("error") or {}
    said = error.get("message") or ""
    match = re.fullmatch(r"prompt is too long: (\d+) tokens > (\d+) maximum", said)
    check("messages: prompt over the context is Anthropic's 400 'prompt is too long'",
          status == 400 and error.get("type") == "invalid_request_error" and match is not None
          and int(match.group(2)) == CONTEXT and over_tokens is not None and abs(int(match.group(1)) - over_tokens) <= 32,
          f"{status} {error.get('type')}: {said[:120]} (count_tokens {over_tokens})")
    with request("POST", "/v1/chat/completions", {"model": served, "max_tokens": 64000, "messages": over}) as answer:
        answer.read()
        check("chat: the same prompt is no 5xx", answer.status < 500, str(answer.status))
    tools = [{"name": "Bash", "description": "Run a shell command.",
              "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    turn1 = [{"role": "user", "content": FILLER * 120},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b c"}]}]
    turn2 = turn1 + [
        {"role": "assistant", "content": [{"type": "text", "text": "Next."},
                                          {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pwd"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "/root"}]},
        {"role": "system", "content": "The task tools haven't been used recently. Consider using them."}]
    first, second = (count_tokens(served, turn, tools=tools) for turn in (turn1, turn2))
    prefilled = []
    for turn in (turn1, turn2):
        queried, hits = prefix_counters()
        status, body = messages(served, {"max_tokens": 1, "messages": turn, "tools": tools, "system": "You code."})
        if status != 200:
            break
        deadline = time.monotonic() + 5  # the counters move once vLLM has logged the request's step
        while prefix_counters()[0] == queried and time.monotonic() < deadline:
            time.sleep(0.1)
        after_queried, after_hits = prefix_counters()
        prefilled.append((after_queried - queried) - (after_hits - hits))
    prefilled = prefilled[-1] if len(prefilled) == 2 else float("inf")
    new = (second or 0) - (first or 0)
    figures["inline_system"] = {"turn1_tokens": first, "turn2_tokens": second, "turn2_prefilled": prefilled}
    check("messages: a new inline system message prefills only the new turn (vLLM's prefix-cache counters)",
          status == 200 and first and second and prefilled <= new + 48,
          f"{status}; turn 1 {first} tokens, turn 2 {second}: {prefilled:.0f} prefilled for {new} new")


def status_checks(check: Checks, run: dict) -> None:
    with request("GET", "/prebake/status") as answer:
        status = json.loads(answer.read()) if answer.status == 200 else {}
    decisions = {d["topic"]: d["decision"] for d in status.get("decisions") or []}
    thinking, runner = decisions.get("thinking-controls", ""), decisions.get("model-runner", "")
    check("status page", answer.status == 200 and status.get("phase") is not None,
          f"phase {status.get('phase')}; model-runner: {runner}; thinking-controls: {thinking[:90]}")
    check(f"status names runner {run['runner']}", run["runner"] in runner, runner)
    check("status says budgets " + ("on" if run["budgets"] else "off"),
          thinking.startswith("on: thinking budgets") if run["budgets"] else thinking.startswith("on without budgets"),
          thinking[:120])


def vllm_runner(log: Path) -> str:
    """Which runner vLLM ran, from its log: V1 is gpu_model_runner.py, V2 gpu/model_runner.py."""
    text = log.read_text(errors="replace") if log.exists() else ""
    if "[gpu_model_runner.py" in text:
        return "V1"
    return "V2" if "[model_runner.py" in text else "?"


def start_pod(check: Checks, name: str, env: dict[str, str], args: list[str], figures: dict):
    """The real launcher in its own session, its output in /tmp/launcher-NAME.log; (process, log, serving?) once
    /health says 200 through the bridge (at most 8 minutes), with start_to_serving_s in figures."""
    log = open(f"/tmp/launcher-{name}.log", "w")
    process = subprocess.Popen([sys.executable, str(REPO / "entrypoint" / "launch.py"), *args], env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    serving = wait_serving(process, 480)
    figures["start_to_serving_s"] = None if serving is None else round(serving, 1)
    return process, log, check("start to serving (/health 200 through the bridge)", serving is not None,
                               f"{figures['start_to_serving_s']} s")


def pod_env(model: str, cache: Path, extra: dict[str, str]) -> dict[str, str]:
    """The launcher's environment on the device: a hopper marker, the device's HF cache, the harness's key."""
    marker = Path("/root/hopper_marker.json")
    marker.write_text(json.dumps(HOPPER_MARKER))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VL_")}
    env.update({"VL_PREBAKED_MARKER": str(marker), "HF_HOME": str(HF), "VL_MODEL": model,
                "VLLM_API_KEY": KEY, "VL_CACHE_ROOT": str(cache), "VL_UTIL": "0.30", **extra})
    return env


def one_run(name: str) -> dict:
    run = RUNS[name]
    check = Checks()
    figures: dict = {"run": name, "model": run["model"]}
    cache = Path(f"/root/cache-{name}")
    env = pod_env(run["model"], cache, {"VL_EFFORT_BUDGETS": BUDGETS, **run["env"]})
    args = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--max-model-len", "4096", "--enforce-eager",
            *run["args"]]
    dry = subprocess.run([sys.executable, str(REPO / "entrypoint" / "launch.py"), "--dry-run", *args], env=env,
                         capture_output=True, text=True)
    plan = json.loads(dry.stdout) if dry.returncode == 0 else {}
    decided = {d["topic"]: d["decision"] for d in plan.get("decisions", [])}
    check("launcher --dry-run", dry.returncode == 0, f"model-runner: {decided.get('model-runner')}; "
          f"VLLM_USE_V2_MODEL_RUNNER={plan.get('env', {}).get('VLLM_USE_V2_MODEL_RUNNER')}" if plan else dry.stderr[-300:])
    baseline = gpu_used_mib()
    process, log, serving = start_pod(check, name, env, args, figures)
    if serving:
        served = chat_checks(check, run["model"], figures)
        messages_checks(check, served, figures)
        try:
            session_checks(check, served, figures)
        except Exception as err:  # a harness error is a failed check, and the run still stops its pod
            check("long-session checks", False, f"{type(err).__name__}: {err}")
        status_checks(check, run)
    run_logs = list(cache.glob("prebake/*/vllm.log"))
    ran = vllm_runner(run_logs[0]) if run_logs else "?"
    figures["vllm_runner"] = ran
    check(f"vLLM ran its {run['runner']} runner (its log)", ran == run["runner"], ran)
    stop_pod(check, process, baseline, figures, "SIGTERM stop")
    figures["checks"] = list(check.lines)
    figures["ok"] = all(item["ok"] for item in check.lines)
    out = os.environ.get("OUT")
    if out:
        Path(out, f"gpu-{name}.json").write_text(json.dumps(figures, indent=1))
        log.close()
        shutil.copy(f"/tmp/launcher-{name}.log", Path(out, f"launcher-{name}.log"))
    return figures


def router_run() -> dict:
    """The `router` run (router_run.py), its figures and checks written as the other runs write theirs."""
    check = Checks()
    logs = Path(os.environ.get("OUT") or "/tmp")
    try:
        figures = routing.run(check, logs)
    except Exception as err:  # a harness error is a failed check, reported like the others
        figures = {"run": "router"}
        check("router run", False, f"{type(err).__name__}: {err}")
    figures["checks"] = list(check.lines)
    figures["ok"] = bool(check.lines) and all(item["ok"] for item in check.lines)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu-router.json").write_text(json.dumps(figures, indent=1))
    return figures


def peak_run(name: str) -> dict:
    """The `peak` run (peak_run.py): a pod as users run it, CUDA graphs on, measured with `vllm bench serve` through
    the bridge and straight at vLLM."""

    check = Checks()
    figures: dict = {"run": name, "model": "tiny/qwen3"}
    env = pod_env("tiny/qwen3", Path(f"/root/cache-{name}"), {})
    args = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--max-model-len", "4096"]
    baseline = gpu_used_mib()
    process, log, serving = start_pod(check, name, env, args, figures)
    if serving:
        try:
            with request("GET", "/prebake/status") as answer:
                argv = (json.loads(answer.read()).get("vllm") or {}).get("argv") or []
            vllm_port = int(argv[argv.index("--port") + 1])
            with urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{vllm_port}/v1/models", headers={"Authorization": f"Bearer {KEY}"})) as answer:
                served = json.loads(answer.read())["data"][0]["id"]
            tokenizer = str(next((HF / "hub" / "models--tiny--qwen3" / "snapshots").iterdir()))
            out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
            figures.update(peak.run(check, PORT, vllm_port, KEY, "tiny/qwen3", served, tokenizer, process.pid, out))
        except Exception as err:  # a harness error is a failed check, and the run still stops its pod
            check("peak run", False, f"{type(err).__name__}: {err}")
    stop_pod(check, process, baseline, figures, "SIGTERM stop")
    figures["checks"] = list(check.lines)
    figures["ok"] = all(item["ok"] for item in check.lines)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], f"gpu-{name}.json").write_text(json.dumps(figures, indent=1))
        log.close()
        shutil.copy(f"/tmp/launcher-{name}.log", Path(os.environ["OUT"], f"launcher-{name}.log"))
    return figures


def catalogue_main(keys: list[str]) -> int:
    """`catalogue [KEY...]`: the catalogue's models scaled down, each through the real launcher (catalogue_run.py)."""
    from benchmarks.gpu import harness

    try:
        catalogue_run.keys_to_run(keys)
    except ValueError as err:
        print(f"usage: harness.py catalogue [KEY...]: {err}", file=sys.stderr)
        return 2
    install_plugin(Checks())  # printed; each run reports its own checks
    results = catalogue_run.run(harness, keys)
    print("[gpu] figures " + json.dumps([{k: v for k, v in r.items() if k != "checks"} for r in results]), flush=True)
    return 0 if results and all(r["ok"] for r in results) else 1


def registry() -> dict[str, Callable[[str], dict]]:
    """Every run by its name on the command line, with what runs it (`catalogue` takes keys, not a name: None)."""
    from benchmarks.gpu import harness  # the module the runs share, not this script's copy (__main__)

    return {**dict.fromkeys(RUNS, one_run), **dict.fromkeys(SWAP_RUNS, swap_run),
            **dict.fromkeys(START_CACHE_RUNS, start_cache_run), "router": lambda _: router_run(), "peak": peak_run,
            "catalogue": None, **{name: functools.partial(pair_runs.run, harness) for name in pair_runs.RUNS}}


def main(argv: list[str]) -> int:
    if argv[:1] == ["catalogue"]:
        return catalogue_main(argv[1:])
    runs = registry()
    if argv == ["--list"]:
        print("\n".join(runs))
        return 0
    unknown = [name for name in argv if name not in runs or runs[name] is None]
    if not argv or unknown:
        print(f"usage: harness.py RUN [RUN...]; RUN is one of {', '.join(runs)} (unknown: {unknown})", file=sys.stderr)
        return 2
    if not set(argv) <= {"router", "router-2pods"}:  # the router runs serve plain vLLM: no plugin
        install_plugin(Checks())  # printed; each run reports its own checks
    if "moe" in argv:
        make_moe()
    results = [runs[name](name) for name in argv]
    summary = [{k: v for k, v in r.items() if k != "checks"} for r in results]
    print("[gpu] figures " + json.dumps(summary), flush=True)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    # The runs share the harness's state (its checks) through the module they import, benchmarks.gpu.harness, not
    # this script's copy of it (__main__).
    from benchmarks.gpu import harness
    sys.exit(harness.main(sys.argv[1:]))
