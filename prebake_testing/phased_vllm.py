"""A stand-in `vllm serve` that starts the way vLLM 0.27.1 does, one phase at a time, then serves.

It prints vLLM 0.27.1's own start-up lines (the messages of the files startphase.toml names), each phase
only once the test has created the file `go-<N>` in $PHASED_CONTROL, so that a test sees every
phase on the status page. Then it serves the stand-in vLLM (standin.py) with a controllable /health
(the file `hang` there: /health never answers; `sick`: it answers 500) and a /metrics page with vLLM
0.27.1's metric names. At the compile step it plays vLLM's AOT compile cache (compile_cache below): it loads
`$VLLM_CACHE_ROOT/torch_compile_cache/torch_aot_compile/<hash>/rank_0_0/model` when it is there and writes it
otherwise, and says which in the file `compile-hit` or `compile-miss`; and Triton's cache (triton_kernels below),
saying `triton-hit` or `triton-miss`. PHASED_MODE=die exits 3 in the middle of loading the weights. PHASED_LEAK names
environment variables whose values it prints, as a careless library would, with a few secrets of its
own in vLLM's shapes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from prebake_testing.standin import StandIn

CONTROL = Path(os.environ["PHASED_CONTROL"])
MODE = os.environ.get("PHASED_MODE", "serve")
PID = os.getpid()

STEPS = [
    [f"(APIServer pid={PID}) INFO 12-01 08:55:00 [api_utils.py:273] non-default args: {{'model': 'x/ornith', "
     "'port': 18081, 'api_key': ['sk-planted-0123456789abcdef']}}",
     f"(APIServer pid={PID}) INFO 12-01 08:55:01 [model.py:1883] Using max model len 1000000"],
    [f"(EngineCore pid={PID}) INFO 12-01 08:55:05 [gpu_model_runner.py:5309] Starting to load model x/ornith...",
     "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]\r",
     f"(EngineCore pid={PID}) INFO 12-01 08:55:09 [default_loader.py:431] Loading weights took 3.20 seconds"],
    [f"(EngineCore pid={PID}) INFO 12-01 08:55:10 [gpu_model_runner.py:5406] Model loading took 17.5 GiB memory "
     "and 4.100000 seconds",
     f"(EngineCore pid={PID}) INFO 12-01 08:55:20 [backends.py:1156] Dynamo bytecode transform time: 9.12 s",
     f"(EngineCore pid={PID}) INFO 12-01 08:55:40 [monitor.py:53] torch.compile took 29.80 s in total"],
    [f"(EngineCore pid={PID}) INFO 12-01 08:55:41 [gpu_worker.py:564] Available KV cache memory: 96.3 GiB",
     "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67 [00:05<00:00, 12.1it/s]",
     f"(EngineCore pid={PID}) INFO 12-01 08:55:48 [gpu_model_runner.py:6914] Graph capturing finished in 7 secs, "
     "took 0.52 GiB"],
]

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="ornith"}} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="ornith"}} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="ornith"}} 0.25
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="ornith"}} {prompt}
vllm:prompt_tokens_created{{engine="0",model_name="ornith"}} 1.7644608e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="ornith"}} {generation}
"""


def say(line: str, stream=sys.stdout) -> None:
    stream.write(line if line.endswith("\r") else line + "\n")
    stream.flush()


def wait_for(name: str) -> None:
    while not (CONTROL / name).exists():
        time.sleep(0.05)


class Phased:
    """standin.py's vLLM, with a /health the test can stop and a /metrics whose counters grow."""

    def __init__(self) -> None:
        self.inner = StandIn()
        self.began = time.monotonic()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] == "/health":
            if (CONTROL / "hang").exists():
                await asyncio.sleep(3600)
            status = 500 if (CONTROL / "sick").exists() else 200
            await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["type"] == "http" and scope["path"] == "/metrics":
            elapsed = time.monotonic() - self.began
            body = METRICS.format(prompt=f"{1000.0 * elapsed:.1f}", generation=f"{50.0 * elapsed:.1f}").encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.inner(scope, receive, send)


def compile_cache(argv: list[str]) -> None:
    """What vLLM 0.27.1's decorators.py does with AOT compile on: a folder named by the hash of what it compiles
    (here its options but --host/--port), loaded if present, else compiled into and saved."""
    import hashlib
    import json

    root = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vllm")
    kept = [a for i, a in enumerate(argv) if a not in ("--host", "--port") and argv[i - 1] not in ("--host", "--port")]
    digest = hashlib.sha256(json.dumps(kept).encode()).hexdigest()
    folder = os.path.join(root, "torch_compile_cache", "torch_aot_compile", digest)
    model = os.path.join(folder, "rank_0_0", "model")
    if os.path.isfile(model):
        say(f"(EngineCore pid={PID}) INFO 12-01 08:55:21 [decorators.py:312] Directly load AOT compilation from "
            f"path {model}")
        (CONTROL / "compile-hit").write_text(model)
        autotune_cache(root, digest)
        triton_kernels(digest, graph_restored=True)
        return
    os.makedirs(os.path.join(folder, "inductor_cache", "fx"), exist_ok=True)
    os.makedirs(os.path.dirname(model), exist_ok=True)
    with open(os.path.join(folder, "inductor_cache", "fx", "graph.bin"), "wb") as out:
        out.write(os.urandom(64 * 1024))
    with open(model, "w") as out:
        out.write(json.dumps({"compiled_for": kept}))
    (CONTROL / "compile-miss").write_text(model)
    autotune_cache(root, digest)
    triton_kernels(digest, graph_restored=False)


TRITON_KERNEL = "triton_poi_fused_add_0"  # an Inductor kernel's name; vLLM's own sampler is one more kernel alike


def _triton_key(text: str) -> str:
    """Triton 3.7.1's folder name for a key (runtime/cache.py `_base32` of a sha256)."""
    import base64
    import hashlib

    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")


def triton_kernels(digest: str, graph_restored: bool) -> None:
    """What Triton 3.7.1 and torch 2.13 do with TRITON_CACHE_DIR at a start. A kernel is a folder named by its key;
    Triton loads it without compiling when its `__grp__<name>.json` lists `<name>.json` and `<name>.cubin` by
    absolute paths that exist (compiler.py `compile`, cache.py `get_group`), else compiles and writes its IR, binary,
    metadata and that index. A compiled graph that was loaded, not compiled, first reloads its kernel's cubin from
    `<key>/<name>.cubin` and warns as torch does when it is not there (triton_heuristics.py `reload_cubin_path`).
    Also written, as Triton does: an autotune result (`<name>.autotune.json` in a folder of its own), Triton's
    compiled launcher (`cuda_utils<EXT_SUFFIX>`) and a `tmp.pid_*` folder of a write in progress."""
    import json
    import sysconfig

    where = os.environ.get("TRITON_CACHE_DIR")
    if not where:
        return
    folder = os.path.join(where, _triton_key(f"kernel-{digest}"))
    cubin = os.path.join(folder, f"{TRITON_KERNEL}.cubin")
    if graph_restored and not os.path.isfile(cubin):
        say(f"(EngineCore pid={PID}) WARNING 12-01 08:55:21 [triton_bundler.py:233] Failed to reload cubin file "
            f"statically launchable autotuner {TRITON_KERNEL}: Cubin file saved by TritonBundler not found at "
            f"{cubin}", sys.stderr)
    try:
        with open(os.path.join(folder, f"__grp__{TRITON_KERNEL}.json")) as index:
            children = json.load(index)["child_paths"]
        found = {name for name, path in children.items() if os.path.exists(path)}
    except (OSError, ValueError, KeyError, AttributeError):
        found = set()
    if {f"{TRITON_KERNEL}.json", f"{TRITON_KERNEL}.cubin"} <= found:
        (CONTROL / "triton-hit").write_text(folder)
        return
    os.makedirs(folder, exist_ok=True)
    files = {}
    for ext in ("source", "ttir", "ttgir", "llir", "ptx", "cubin", "json"):
        path = os.path.join(folder, f"{TRITON_KERNEL}.{ext}")
        with open(path, "wb") as out:
            out.write(json.dumps({"name": TRITON_KERNEL}).encode() if ext == "json" else os.urandom(2048))
        files[f"{TRITON_KERNEL}.{ext}"] = path
    with open(os.path.join(folder, f"__grp__{TRITON_KERNEL}.json"), "w") as out:
        out.write(json.dumps({"child_paths": files}))
    tuned = os.path.join(where, _triton_key(f"autotune-{digest}"))
    os.makedirs(tuned, exist_ok=True)
    with open(os.path.join(tuned, "_topk_topp_kernel.autotune.json"), "w") as out:
        out.write(json.dumps({"key": [1], "configs_timings": []}))
    launcher = os.path.join(where, _triton_key("cuda_utils"))
    os.makedirs(os.path.join(where, f"tmp.pid_{PID}_0"), exist_ok=True)
    with open(os.path.join(where, f"tmp.pid_{PID}_0", f"{TRITON_KERNEL}.cubin"), "wb") as out:
        out.write(b"half-written")
    os.makedirs(launcher, exist_ok=True)
    with open(os.path.join(launcher, "cuda_utils" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")), "wb") as out:
        out.write(b"\x7fELF" + os.urandom(1024))
    (CONTROL / "triton-miss").write_text(folder)


def autotune_cache(root: str, digest: str) -> None:
    """What vLLM 0.27.1's kernel warm-up does with FlashInfer's autotuner (model_executor/warmup/
    flashinfer_autotune_cache.py): VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR (else a folder under VLLM_CACHE_ROOT)
    /<hash of the compile factors>/autotune_configs.json, read back when present, else tuned and written."""
    base = os.environ.get("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR") or os.path.join(
        root, "flashinfer_autotune_cache", "flashinfer", "0.6.16")
    path = os.path.join(base, digest, "autotune_configs.json")
    if os.path.isfile(path):
        (CONTROL / "autotune-hit").write_text(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write('{"tuned": "stand-in"}')
    (CONTROL / "autotune-miss").write_text(path)


def main(argv: list[str]) -> int:
    for name in os.environ.get("PHASED_LEAK", "").split():
        say(f"(APIServer pid={PID}) DEBUG 12-01 08:55:00 [env.py:1] {name}={os.environ.get(name, '')}")
    if os.environ.get("PHASED_LEAK"):
        say("Authorization: Bearer planted-bearer-value-123", sys.stderr)
        say("using hf_PlantedTokenNotInTheEnvironment0123 to download x/ornith", sys.stderr)
    for number, lines in enumerate(STEPS):
        if number:
            wait_for(f"go-{number}")
        for line in lines:
            say(line, sys.stderr if line.startswith(("Loading safetensors", "Capturing")) else sys.stdout)
        if number == 2:
            compile_cache(argv)
        if MODE == "die" and number == 1:
            say("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", sys.stderr)
            return 3
    wait_for("go-4")
    import uvicorn

    port = int(argv[argv.index("--port") + 1])
    say(f"(APIServer pid={PID}) INFO 12-01 08:55:50 [api_server.py:682] Starting vLLM server on http://127.0.0.1:{port}")
    uvicorn.run(Phased(), host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_keep_alive=5,
                timeout_graceful_shutdown=1)  # a hung /health would hold SIGTERM for the 30 s grace
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
