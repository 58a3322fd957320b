"""Swaps with vLLM's sleep mode, through the real launcher and bridge: stand-in `vllm` processes that sleep and
wake as vLLM's development endpoints do, a fake nvidia-smi whose memory follows them (a sleeping one keeps
keep_mib), and a wake that fails like a real CUDA OOM when another vLLM is awake on the GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from prebake_testing import claudecli
from prebake_testing.hosts import LAUNCH, Launcher
from prebake_testing.net import get, request, wait_until
from prebake_testing.swappod import BIG_HOST, SLEEP, answered_by, chat, warm


KEY = {"VLLM_API_KEY": "sleep-pod-key-123"}
AUTH = {"authorization": "Bearer sleep-pod-key-123"}


def starts(pod, name: str) -> int:
    return sum(1 for event in pod.events(name) if event.endswith(" started"))


def test_each_model_starts_once_then_swaps_sleep_one_and_wake_the_other(pods):
    pod = pods({"ornith": {}, "qwen": {}}, env=SLEEP)
    swap = warm(pod)
    assert swap["mode"] == "sleep level 1" and swap["models"] == {"ornith": "awake", "qwen": "asleep (level 1)"}
    # ornith started, served its health check, slept; qwen started, slept; ornith woke
    assert [e for e in pod.events() if e.split()[1] in ("started", "slept", "woke")] == \
        ["ornith started", "ornith slept 1", "qwen started", "qwen slept 1", "ornith woke"]
    # each served one request before it first slept (what a vLLM does once is not paid after a swap)
    assert "swap: ornith's first request took" in pod.stderr() and "swap: qwen's first request took" in pod.stderr()
    for model in ("qwen", "ornith", "qwen"):
        status, raw = chat(pod, model)
        assert status == 200 and answered_by(raw) == model
    assert starts(pod, "ornith") == 1 and starts(pod, "qwen") == 1  # no restart: sleep and wake only
    assert not any("OOM" in event for event in pod.events())
    status = get(pod.port, "/prebake/status")[2]["swap"]
    assert status["models"] == {"ornith": "asleep (level 1)", "qwen": "awake"} and status["swaps"] == 3
    assert [(s["from"], s["to"], s["how"]) for s in status["last_swaps"]] == \
        [("ornith", "qwen", "sleep level 1 + wake"), ("qwen", "ornith", "sleep level 1 + wake"),
         ("ornith", "qwen", "sleep level 1 + wake")]
    assert all(s["seconds"] < 30 for s in status["last_swaps"])
    text = get(pod.port, "/prebake/status.txt")[2].decode()
    assert "swap (sleep level 1): ornith asleep (level 1), qwen awake; 3 swap(s)" in text
    # every vLLM of the set ends with the container, asleep or not
    assert pod.stop() == 0 and pod.kill_leftovers() == []


def test_level_2_reloads_the_weights_at_each_wake(pods):
    pod = pods({"ornith": {}, "qwen": {}}, env={"VL_SWAP_SLEEP": "2", **BIG_HOST})
    warm(pod)
    status, raw = chat(pod, "qwen")
    assert status == 200 and answered_by(raw) == "qwen"
    assert "qwen slept 2" in pod.events() and "ornith slept 2" in pod.events()
    rpc = [e for e in get(pod.internal + 1, "/_standin/events")[2] if e.get("path") == "/collective_rpc"]
    assert rpc and json.loads(rpc[-1]["body"]) == {"method": "reload_weights"}


def test_the_bridge_refuses_vllms_development_endpoints_with_or_without_the_key(pods):
    pod = pods({"ornith": {}, "qwen": {}}, env={**SLEEP, **KEY})
    warm(pod)
    for path in ("/sleep?level=1", "/wake_up", "/is_sleeping", "/collective_rpc", "/reset_prefix_cache",
                 "//sleep", "/sleep/", "/v1/../sleep", "/%73leep", "/server_info", "/pause",
                 # vLLM's router matches `^/sleep$`, and `$` matches before a final line feed (serving/routes.py)
                 "/sleep%0A?level=1", "/wake_up%0A", "/is_sleeping%0A", "/collective_rpc%0A", "/sleep%0A/"):
        for headers in (None, AUTH):
            status, _, raw = request(pod.port, "GET" if "is_" in path else "POST", path, {}, headers)
            assert status == 403, (path, status, raw)
            assert "development endpoints" in json.loads(raw)["error"]["message"]
    # nothing reached vLLM: the loaded model is awake and answers
    assert get(pod.internal, "/is_sleeping")[2] == {"is_sleeping": False}
    status, raw = chat(pod, "ornith", headers=AUTH)
    assert status == 200 and answered_by(raw) == "ornith"


def test_a_wake_that_fails_restarts_that_model(pods):
    pod = pods({"ornith": {}, "qwen": {"wake_fails": True}}, env=SLEEP)
    warm(pod)
    status, raw = chat(pod, "qwen")
    assert status == 200 and answered_by(raw) == "qwen"
    assert "qwen wake failed" in pod.events() and starts(pod, "qwen") == 2
    assert not any("OOM" in event for event in pod.events())
    last = get(pod.port, "/prebake/status")[2]["swap"]["last_swaps"][-1]
    assert (last["to"], last["how"]) == ("qwen", "sleep level 1 + restart")
    status, raw = chat(pod, "ornith")  # the other one still wakes
    assert status == 200 and answered_by(raw) == "ornith" and starts(pod, "ornith") == 1


def test_a_model_that_does_not_sleep_is_stopped_before_another_wakes(pods):
    pod = pods({"ornith": {}, "qwen": {"sleep_fails": True}}, env=SLEEP)
    swap = warm(pod)
    assert swap["models"] == {"ornith": "awake", "qwen": "down"}  # qwen failed to sleep at the start: stopped
    status, raw = chat(pod, "qwen")  # started again, since it has no vLLM
    assert status == 200 and answered_by(raw) == "qwen" and starts(pod, "qwen") == 2
    status, raw = chat(pod, "ornith")  # qwen does not sleep: stopped, then ornith wakes
    assert status == 200 and answered_by(raw) == "ornith"
    assert not any("OOM" in event for event in pod.events())
    assert get(pod.port, "/prebake/status")[2]["swap"]["models"] == {"ornith": "awake", "qwen": "down"}


def test_a_model_that_cannot_start_is_failed_and_the_first_one_serves(pods):
    pod = pods({"ornith": {}, "qwen": {"exit": 3}}, env=SLEEP)
    swap = warm(pod)
    assert swap["models"] == {"ornith": "awake", "qwen": "failed"}
    status, raw = chat(pod, "ornith")
    assert status == 200 and answered_by(raw) == "ornith"
    status, raw = chat(pod, "qwen")
    assert status == 503 and b"swap to model qwen failed" in raw and b"exited with code 3" in raw
    status, raw = chat(pod, "ornith")
    assert status == 200 and answered_by(raw) == "ornith"


def test_a_sleeping_models_death_is_seen_and_it_starts_again_when_wanted(pods):
    pod = pods({"ornith": {}, "qwen": {}}, env=SLEEP)
    warm(pod)
    qwen_pid = int(next(line.split()[2] for line in pod.lines() if " qwen " in line and line.endswith("started")))
    os.kill(qwen_pid, 9)
    deadline = time.monotonic() + 10
    while get(pod.port, "/prebake/status")[2]["swap"]["models"]["qwen"] != "down":
        assert time.monotonic() < deadline, pod.stderr()
        time.sleep(0.1)
    assert pod.process.poll() is None  # a sleeping model's exit is not the container's
    status, raw = chat(pod, "qwen")
    assert status == 200 and answered_by(raw) == "qwen" and starts(pod, "qwen") == 2


def dry_run(tmp_path, env: dict, meminfo_kib: int) -> tuple[int, dict | str]:
    tmp_path = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    launcher = Launcher(tmp_path)
    full = launcher.base_env("h200_580")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal: {meminfo_kib * 2} kB\nMemAvailable: {meminfo_kib} kB\n")
    full.update({"VL_MODEL": "ornith", "VL_SWAP": "ornith:ornith,qwen:qwen", "VL_MEMINFO": str(meminfo),
                 "VL_CGROUP": str(tmp_path / "no-cgroup"), **env})
    done = subprocess.run([sys.executable, str(LAUNCH), "--dry-run"], env=full, capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else done.stderr


def decision(plan: dict, topic: str) -> dict:
    return next(d for d in plan["decisions"] if d["topic"] == topic)


@pytest.mark.parametrize("ram_gib, spec, expected", [
    (128, "off", "sleep level 1"),  # 24.3 GiB of weights asleep at worst + 4 GiB per vLLM
    (20, "off", "sleep level 2"),  # too little RAM for level 1
    (20, "ngram", "restart"),  # level 2 cannot reload a speculating model
])
def test_the_swap_mode_follows_host_ram_and_the_models(tmp_path, ram_gib, spec, expected):
    code, plan = dry_run(tmp_path, {"VL_SPEC": spec}, ram_gib << 20)
    assert code == 0, plan
    assert decision(plan, "swap-mode")["decision"] == expected and plan["swap"]["mode"] == expected
    models = plan["swap"]["models"]
    if expected == "restart":
        assert all("--enable-sleep-mode" not in m["argv"] for m in models)
        return
    ports = [m["argv"][m["argv"].index("--port") + 1] for m in models]
    assert len(set(ports)) == 2 and int(ports[1]) == int(ports[0]) + 1  # each vLLM on its own port
    assert all("--enable-sleep-mode" in m["argv"] and m["env"]["VLLM_SERVER_DEV_MODE"] == "1" for m in models)


def test_a_forced_level_that_cannot_work_is_refused_naming_the_knob(tmp_path):
    code, err = dry_run(tmp_path, {"VL_SWAP_SLEEP": "2", "VL_SPEC": "ngram"}, 128 << 20)
    assert code == 2 and "VL_SWAP_SLEEP=2" in err and "VL_SWAP_SLEEP=1" in err
    code, err = dry_run(tmp_path, {"VL_SWAP_SLEEP": "1"}, 8 << 20)
    assert code == 2 and "VL_SWAP_SLEEP=1" in err and "host RAM available 8.0 GiB" in err
    code, err = dry_run(tmp_path, {"VL_SWAP_SLEEP": "maybe"}, 128 << 20)
    assert code == 2 and "VL_SWAP_SLEEP" in err


def test_each_awake_vllm_leaves_room_for_the_sleeping_ones(tmp_path):
    # three models on a 24 GiB card: 0.93 would leave less than 2 x 2.5 GiB beside the awake one
    launcher = Launcher(tmp_path)
    full = launcher.base_env("rtx4090_580")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemAvailable: {256 << 20} kB\n")
    full.update({"VL_MODEL": "qwen", "VL_SWAP": "qwen:qwen,a:cyankiwi/A,b:cyankiwi/B", "VL_MEMINFO": str(meminfo),
                 "VL_CGROUP": str(tmp_path), "VL_SWAP_SLEEP": "2"})
    done = subprocess.run([sys.executable, str(LAUNCH), "--dry-run"], env=full, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    utils = [float(m["argv"][m["argv"].index("--gpu-memory-utilization") + 1]) for m in plan["swap"]["models"]]
    assert all(u < 0.93 for u in utils), utils
    assert "the other models of the swap set sleep" in decision(plan, "gpu-memory-utilization")["why"]


CLAUDE_VERSION = claudecli.supported()["newest"]
CLAUDE = claudecli.binary(CLAUDE_VERSION)  # .ci/run installs it under /opt/claude-code/<version>, off PATH


@pytest.mark.skipif(CLAUDE is None, reason=claudecli.install_hint(CLAUDE_VERSION))
def test_claude_code_switches_models_on_a_sleeping_pod(pods, tmp_path):
    pod = pods({"ornith": {}, "qwen": {}}, env={**SLEEP, **KEY})
    warm(pod)
    home = tmp_path / "home"
    home.mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update({"HOME": str(home), "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{pod.port}", "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_AUTH_TOKEN": KEY["VLLM_API_KEY"],
                "ANTHROPIC_DEFAULT_OPUS_MODEL": "ornith", "ANTHROPIC_DEFAULT_SONNET_MODEL": "qwen",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL": "ornith"})
    for alias, woke in (("sonnet", "qwen woke"), ("opus", "ornith woke")):
        done = subprocess.run([CLAUDE, "-p", "say hi", "--model", alias], env=env, capture_output=True, text=True,
                              timeout=90)
        assert done.returncode == 0 and "tok0" in done.stdout, done.stdout + done.stderr
        assert pod.events().count(woke) >= 1, pod.events()
    assert starts(pod, "ornith") == 1 and starts(pod, "qwen") == 1
    assert not any("OOM" in event for event in pod.events())


def test_every_vllm_of_a_sleeping_set_stays_on_loopback_whatever_the_container_says(tmp_path):
    """Each model of a sleeping set runs a keyless vLLM with the development endpoints on: a --host 0.0.0.0 among
    the container arguments must not reach any of them."""
    launcher = Launcher(tmp_path)
    full = launcher.base_env("h200_580")
    full.update({"VL_MODEL": "ornith", "VL_SWAP": "ornith:ornith,qwen:qwen", **SLEEP})
    done = subprocess.run([sys.executable, str(LAUNCH), "--dry-run", "--host", "0.0.0.0"], env=full,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    models = plan["swap"]["models"]
    assert len(models) == 2 and all("--enable-sleep-mode" in m["argv"] for m in models)
    for model in models:
        argv = model["argv"]
        assert argv.count("--host") == 1 and argv[argv.index("--host") + 1] == "127.0.0.1", argv
    assert decision(plan, "vllm-host")["decision"] == "127.0.0.1, not the container's --host 0.0.0.0"


def test_a_request_that_came_during_the_warm_up_is_served_when_it_ends(pods):
    pod = pods({"ornith": {}, "qwen": {"start_s": 2}}, env=SLEEP, ready=False)
    wait_until(lambda: "qwen started" in pod.events(), 30, "qwen's start in the warm-up", pod.process)
    status, raw = chat(pod, "ornith")  # nothing else comes to kick the scheduler once the warm-up is over
    assert status == 200 and answered_by(raw) == "ornith"
    assert "every model started once" in pod.stderr() and starts(pod, "qwen") == 1


@pytest.mark.parametrize("path", ["/invocations", "/v1/chat/completions/batch"])
def test_a_request_on_vllms_other_generating_paths_holds_its_model_awake_through_a_swap(pods, path):
    """They name no model the bridge reads and get no heartbeats, but a swap waits for them as for a chat: the
    model is not put to sleep under them (issue 47's last paragraph, probed)."""
    pod = pods({"ornith": {}, "qwen": {}}, env={**SLEEP, **KEY, "VL_SWAP_DRAIN": "30"})
    warm(pod)
    outcome = {}

    def long_one() -> None:
        outcome["answer"] = request(pod.port, "POST", path, {"model": "ornith", "stream": False,
                                                             "messages": [{"role": "user", "content": "hi"}]},
                                    {**AUTH, "x-standin-delay": "2"}, timeout=60)

    running = threading.Thread(target=long_one)
    running.start()
    wait_until(lambda: len(get(pod.internal, "/_standin/active")[2]) == 1, 20, f"{path} at ornith", pod.process)
    status, raw = chat(pod, "qwen", headers=AUTH)
    running.join(30)
    assert status == 200 and answered_by(raw) == "qwen"
    assert outcome["answer"][0] == 200 and answered_by(outcome["answer"][2]) == "ornith", outcome
    assert "swap: 1 request(s) running on ornith finish before the swap to qwen" in pod.stderr()
    slept = [e for e in pod.events("ornith") if e.split()[1] == "slept"]
    assert len(slept) == 2  # once at the warm-up, once for this swap: after the request, which was answered
