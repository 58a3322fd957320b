"""harness.py tp2 | dp2 | swap-tp2 | router-2pods | bench-pair: two GPUs of one host (issue 50, nvidia-h200-x2).

  tp2, dp2      the real launcher with the 8B-like model (mkmodel.py's /root/m8b, dummy weights), its default
                (tensor parallel over both GPUs) and VL_DP=2, compiled as users run it (CUDA graphs: the seed's NCCL
                busy-wait came after graph capture). The a40 image's NCCL settings (images/a40.toml [host.nccl])
                written to /etc/nccl.conf as that image bakes them (PAIR_NCCL=off: none). Checks: the launcher's
                --dry-run chose TP/DP, /health, /v1/messages streamed, vLLM's context is the launcher's, each GPU
                worker's /proc/PID/environ and NCCL's own init log (NCCL_DEBUG=INFO, one file per process) for the
                settings, SIGTERM frees both GPUs (nvidia-smi: no compute process, every GPU's memory back).
  swap-tp2      harness.py's swap run (two models, sleep level 1, six swaps each to first token <= 2 s) on the pair
                at tensor parallel 2, its status page polled all along: never two models awake.
  router-2pods  router_run.py's replay (a dozen Claude Code-shaped sessions, affinity vs one server) with its two
                vLLM servers pinned one per GPU (CUDA_VISIBLE_DEVICES), then a second affinity replay during which
                server 1 is killed half-way: every session goes on on server 0 (nginx moves it); a stream server 1
                had begun is lost, at most one request a session.
  bench-pair    `vllm bench serve` at 64 streams through the bridge (peak_run.bench) on the 8B-like model at TP 2,
                TP 1 (VL_TP=1) and DP 2 (VL_DP=2), one pod after the other: output tokens/s, TTFT and TPOT.

Budget: a compiled 8B-like start takes ~3 min, so tp2 and dp2 each want a device call of their own, bench-pair
three calls (PAIR_MODES=tp2 | tp1 | dp2 picks one). HARNESS_VLLM (router-2pods) runs the stand-in vLLM instead.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from types import ModuleType

from benchmarks.gpu.checks import Checks

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUNS = ("tp2", "dp2", "swap-tp2", "router-2pods", "bench-pair")
MODES = {"tp2": {}, "tp1": {"VL_TP": "1"}, "dp2": {"VL_DP": "2"}}
NCCL_CONF = Path("/etc/nccl.conf")
STREAMS = 64


def baked_nccl(variant: str = "a40") -> dict[str, str]:
    """The NCCL settings a variant bakes into /etc/nccl.conf (images/VARIANT.toml [host.nccl])."""
    with open(REPO / "images" / f"{variant}.toml", "rb") as f:
        return {k: str(v) for k, v in ((tomllib.load(f).get("host") or {}).get("nccl") or {}).items()}


def nccl_log_settings(text: str) -> dict[str, str]:
    """What NCCL's own INFO log says it took: 'NCCL_X set by environment to V' (nccl.conf's lines read the same)."""
    return dict(re.findall(r"\b(NCCL_[A-Z0-9_]+) set by (?:environment|configuration file|config file) to (\S+?)\.?$",
                           text, flags=re.MULTILINE))


def proc_environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def gpus_mib() -> list[int]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def compute_pids() -> list[int]:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout
    return [int(x) for x in out.split() if x.strip().isdigit()]


def two_gpus(check: Checks) -> bool:
    count = len(gpus_mib())
    return check("two GPUs on this host", count >= 2, f"{count} GPU(s): this run needs the nvidia-h200-x2 kind")


def stop_pair(h: ModuleType, check: Checks, process: subprocess.Popen, baseline: list[int], figures: dict,
              label: str) -> None:
    """SIGTERM to the launcher's session; every GPU's memory back to its baseline, no compute process left."""
    serving = gpus_mib()
    began = time.monotonic()
    code = h.end_session(process)
    after, apps = gpus_mib(), compute_pids()
    for _ in range(30):
        if not apps and all(a <= b + 512 for a, b in zip(after, baseline)):
            break
        time.sleep(0.5)
        after, apps = gpus_mib(), compute_pids()
    figures["gpu_mib"] = {"before": baseline, "serving": serving, "after": after}
    check(label, code is not None, f"exit {code} in {round(time.monotonic() - began, 1)} s")
    check("both GPUs freed (nvidia-smi)", not apps and all(a <= b + 512 for a, b in zip(after, baseline)),
            f"{baseline} -> {serving} -> {after} MiB; compute apps: {apps or 'none'}")


def pair_env(h: ModuleType, name: str, extra: dict[str, str]) -> dict[str, str]:
    h.make_repo("tiny/m8b", Path("/root/m8b"))
    env = h.pod_env("tiny/m8b", Path(f"/root/cache-{name}"), {
        "VL_HFOFFLINE": "on", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": f"/tmp/nccl-{name}.%h.%p.log", **extra})
    env.pop("VL_UTIL")  # the launcher's own utilisation
    return env


def dry_run(env: dict[str, str], args: list[str]) -> dict:
    done = subprocess.run([sys.executable, str(REPO / "entrypoint" / "launch.py"), "--dry-run", *args], env=env,
                          capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-300:]}


def option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def nccl_checks(check: Checks, name: str, pgid: int, want: dict[str, str], figures: dict) -> None:
    """Each GPU worker of the pod: its environment, and what NCCL's init log says it took. At DP 2 a dense model's
    replicas may share no NCCL communicator: a worker without a log passes there, saying so."""
    from benchmarks.gpu.peak_run import descends_from

    workers = [pid for pid in compute_pids() if descends_from(pid, pgid)]
    figures["workers"] = {pid: {k: v for k, v in proc_environ(pid).items() if k.startswith("NCCL")} for pid in workers}
    check("GPU workers of the pod (nvidia-smi compute apps)", len(workers) >= 2, str(workers))
    for pid in workers:
        logs = list(Path("/tmp").glob(f"nccl-{name}.*.{pid}.log"))
        took = nccl_log_settings(logs[0].read_text(errors="replace")) if logs else {}
        environ = figures["workers"][pid]
        if not logs and name != "tp2":
            check(f"worker {pid}: no NCCL communicator (no init log)", True, f"environ: {json.dumps(environ)}")
            continue
        check(f"worker {pid}: NCCL took the baked settings (its init log)",
                bool(logs) and all(took.get(k) == v for k, v in want.items()),
                f"log: {json.dumps(took)}; environ: {json.dumps(environ)}; want {json.dumps(want)}")


def serving_pod(h: ModuleType, name: str, extra: dict[str, str], tp: int, dp: int, body) -> dict:
    """One pod of the 8B-like model on the pair: dry-run, start, `body(check, figures, argv, process)`, SIGTERM."""
    check = Checks()
    figures: dict = {"run": name, "model": "tiny/m8b"}
    if not two_gpus(check):
        return {**figures, "checks": list(check.lines), "ok": False}
    args = ["--load-format", "dummy"]
    env = pair_env(h, name, extra)
    plan = dry_run(env, args)
    argv = plan.get("argv", [])
    chose = (option(argv, "--tensor-parallel-size"), option(argv, "--data-parallel-size"))
    check(f"launcher --dry-run: TP {tp}, DP {dp}", chose == (str(tp), str(dp)), f"{chose} {plan.get('error', '')}")
    baseline = gpus_mib()
    process, log, serving = h.start_pod(check, name, env, args, figures)
    if serving:
        try:
            body(check, figures, argv, process)
        except Exception as err:  # a harness error is a failed check, and the pod still stops
            check(f"{name} checks", False, f"{type(err).__name__}: {err}")
    stop_pair(h, check, process, baseline, figures, "SIGTERM stop")
    log.close()
    figures["checks"] = list(check.lines)
    figures["ok"] = all(c["ok"] for c in check.lines)
    return figures


def parallel_run(h: ModuleType, name: str) -> dict:
    """tp2 / dp2."""
    from benchmarks.gpu import catalogue_run

    check = Checks()
    if not two_gpus(check):  # before anything is written to /etc
        return {"run": name, "checks": list(check.lines), "ok": False}
    want = baked_nccl() if os.environ.get("PAIR_NCCL", "a40") != "off" else {}
    before = NCCL_CONF.read_text() if NCCL_CONF.exists() else None
    NCCL_CONF.write_text("".join(f"{k}={v}\n" for k, v in want.items()))
    tp, dp = (2, 1) if name == "tp2" else (1, 2)

    def body(check: Checks, figures: dict, argv: list[str], process: subprocess.Popen) -> None:
        with h.request("GET", "/v1/models") as answer:
            models = json.loads(answer.read()).get("data", [])
        served = models[0]["id"] if models else "?"
        figures["max_model_len"] = models[0].get("max_model_len") if models else None
        planned = option(argv, "--max-model-len")
        check("vLLM's context is the launcher's", planned is None or str(figures["max_model_len"]) == planned,
                f"launcher {planned or 'left to vLLM'}, vLLM {figures['max_model_len']}")
        status, blocks, error = catalogue_run.message_blocks(h, served, True, "off")
        check("/v1/messages streamed", status == 200 and not error, f"{status} {error} {[b['type'] for b in blocks]}")
        nccl_checks(check, name, process.pid, want, figures)

    try:
        return serving_pod(h, name, MODES["dp2" if dp == 2 else "tp2"], tp, dp, body)
    finally:
        if before is None:
            NCCL_CONF.unlink(missing_ok=True)
        else:
            NCCL_CONF.write_text(before)


def swap_tp2(h: ModuleType) -> dict:
    """harness.py's swap run at TP 2, watched: never two models awake."""
    check = Checks()
    if not two_gpus(check):
        return {"run": "swap-tp2", "checks": list(check.lines), "ok": False}
    h.SWAP_RUNS["swap-tp2"] = dict(h.SWAP_RUNS["swap"])
    awake: list[list[str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.25):
            try:
                models = h.swap_status().get("models") or {}
            except Exception:  # the pod is starting or stopping: nothing to read yet
                continue
            up = sorted(m for m, state in models.items() if state == "awake")
            if len(up) > 1:
                awake.append(up)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        figures = h.swap_run("swap-tp2")
    finally:
        done.set()
        watcher.join(5)
    check.lines.extend(figures["checks"])  # the swap run's own, after this run's first
    check("never two models awake (status page every 0.25 s)", not awake, f"{len(awake)} polls with two: {awake[:3]}")
    # the plan swap_run started, planned again (its repos exist now): both models at tensor parallel 2
    env = h.pod_env("tiny/m8b", Path("/root/cache-swap-tp2"), {
        "VL_SWAP": "m4b:tiny/m4b", "VL_SWAP_SLEEP": "1", "VL_HFOFFLINE": "on", "VL_UTIL": "0.5"})
    plan = dry_run(env, ["--load-format", "dummy", "--max-model-len", "4096", "--enforce-eager"])
    tps = [option(m["argv"], "--tensor-parallel-size") for m in (plan.get("swap") or {}).get("models", [])]
    check("both models of the swap at tensor parallel 2 (launcher --dry-run)", tps == ["2", "2"], str(tps))
    figures["checks"] = list(check.lines)
    figures["ok"] = all(c["ok"] for c in check.lines)
    return figures


def router_2pods(h: ModuleType) -> dict:
    """router_run.py's servers one per GPU, its replay, then a server killed half-way through a replay."""
    from benchmarks.gpu import router_run as routing

    check = Checks()
    stand_in = bool(os.environ.get("HARNESS_VLLM"))
    if not stand_in and not two_gpus(check):
        return {"run": "router-2pods", "checks": list(check.lines), "ok": False}
    started, pins = [], []
    plain_start = routing.start_vllm

    def start_pinned(port: int, log: Path) -> subprocess.Popen:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(len(started) % 2)
        pins.append(os.environ["CUDA_VISIBLE_DEVICES"])
        try:
            process = plain_start(port, log)
        finally:
            os.environ.pop("CUDA_VISIBLE_DEVICES")
        started.append(process)
        return process

    routing.start_vllm = start_pinned
    logs = Path(os.environ.get("OUT") or "/tmp")
    try:
        figures = routing.run(check, logs)
        figures["run"] = "router-2pods"
        figures["killed"] = killed_mid_session(check, routing, logs)
        figures["pinned"] = pins
        check("one server per GPU (CUDA_VISIBLE_DEVICES)", pins[:2] == ["0", "1"], str(pins))
    except Exception as err:  # a harness error is a failed check, reported like the others
        figures = {"run": "router-2pods"}
        check("router-2pods run", False, f"{type(err).__name__}: {err}")
    finally:
        routing.start_vllm = plain_start
        for process in started:
            routing.stop(process)
    figures["checks"] = list(check.lines)
    figures["ok"] = bool(check.lines) and all(c["ok"] for c in check.lines)
    return figures


def killed_mid_session(check: Checks, routing: ModuleType, logs: Path) -> dict:
    """Two fresh servers behind the router (affinity); server 1 killed half-way through the replay."""
    turns = routing.load_turns()
    ports = [routing.free_port(), routing.free_port()]
    servers = [routing.start_vllm(port, logs / f"router-2pods-vllm{i}.log") for i, port in enumerate(ports)]
    run_dir = Path(f"/tmp/router-2pods-{os.getpid()}")
    router = None
    try:
        for i, port in enumerate(ports):
            up = routing.wait_for(lambda: routing.http_call(port, "GET", "/health", timeout=5)[0] == 200, 300, servers[i])
            if not check(f"kill phase: server {i} serving", up is not None):
                return {}
        router, port = routing.start_router(False, ports, routing.carried_nginx(), run_dir, logs / "router-2pods-nginx.log")
        routing.wait_for(lambda: routing.http_call(port, "GET", "/health", timeout=5)[0] == 200, 30, router)
        killed: dict = {}

        def kill() -> None:
            killed["at_s"] = round(time.monotonic() - began, 1)
            os.killpg(servers[1].pid, signal.SIGKILL)

        began = time.monotonic()
        timer = threading.Timer(float(os.environ.get("PAIR_KILL_AFTER_S", "20")), kill)
        timer.start()
        result = routing.replay(port, turns, "killed")
        timer.cancel()
        result["killed_at_s"] = killed.get("at_s")
        # A stream the killed server had begun cannot move (its headers reached the client): at most the one request
        # each session had in flight there is lost; every later turn of that session must go to the other server.
        check("a server killed mid-session: every session goes on, losing at most the request in flight",
                killed.get("at_s") is not None and result.get("most_failed_in_a_session", 1) <= 1
                and result.get("ok", 0) >= result.get("requests", 0) - routing.SESSIONS, json.dumps(result)[:300])
        return result
    finally:
        if router is not None:
            routing.stop(router, 10)
        for server in servers:
            routing.stop(server)


def bench_pair(h: ModuleType) -> dict:
    """`vllm bench serve` at 64 streams through the bridge, one pod per mode (PAIR_MODES, default all three)."""
    from benchmarks.gpu import peak_run

    results: dict = {"run": "bench-pair", "streams": STREAMS}
    checks: list = []
    for mode in os.environ.get("PAIR_MODES", "tp2 tp1 dp2").split():
        tp, dp = {"tp2": (2, 1), "tp1": (1, 1), "dp2": (1, 2)}[mode]

        def body(check: Checks, figures: dict, argv: list[str], process: subprocess.Popen, mode: str = mode) -> None:
            with h.request("GET", "/v1/models") as answer:
                served = json.loads(answer.read())["data"][0]["id"]
            snapshot = str(next((h.HF / "hub" / "models--tiny--m8b" / "snapshots").iterdir()))
            os.environ["OPENAI_API_KEY"] = h.KEY  # vLLM's benchmark client sends it; the bridge checks it
            peak_run.register()
            peak_run.bench(h.BRIDGE, "chat", "tiny/m8b", served, snapshot, STREAMS, STREAMS, 0)  # warm-up
            found = peak_run.bench(h.BRIDGE, "chat", "tiny/m8b", served, snapshot, STREAMS, STREAMS * 6, 1)
            figures["bench"] = {k: round(found[k], 2) for k in ("output_throughput", "median_ttft_ms",
                                                              "median_tpot_ms") if k in found}
            check(f"{mode}: vllm bench serve, {STREAMS} streams", found.get("completed") == STREAMS * 6,
                    json.dumps(figures["bench"]))

        figures = serving_pod(h, f"bench-{mode}", MODES[mode], tp, dp, body)
        checks += figures["checks"]
        results[mode] = figures.get("bench")
    results["checks"] = checks
    results["ok"] = bool(checks) and all(c["ok"] for c in checks)
    return results


def run(h: ModuleType, name: str) -> dict:
    figures = {"tp2": lambda: parallel_run(h, "tp2"), "dp2": lambda: parallel_run(h, "dp2"),
               "swap-tp2": lambda: swap_tp2(h), "router-2pods": lambda: router_2pods(h),
               "bench-pair": lambda: bench_pair(h)}[name]()
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], f"gpu-{name}.json").write_text(json.dumps(figures, indent=1, default=str))
    return figures
