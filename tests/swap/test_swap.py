"""Swapping through the real launcher and bridge, with stand-in vLLM processes: requests naming the other
model swap the pod, wait with heartbeats, share one swap; stops escalate; failures fall back."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import threading
import time

from prebake_testing.net import get, request, wait_until
from prebake_testing.swappod import MIB, answered_by, chat

MESSAGES = "/v1/messages"


def test_a_request_for_the_other_model_swaps_and_waits_with_heartbeats(pods):
    pod = pods({"ornith": {"engine": True}, "qwen": {"start_s": 1.5}})
    assert pod.models()["ornith"]["loaded"] and not pod.models()["qwen"]["loaded"]
    assert pod.gpu_used_mib() >= 2 * MIB  # the API server and its engine

    began = time.monotonic()
    status, raw = chat(pod, "qwen")
    assert status == 200 and answered_by(raw) == "qwen" and raw.endswith(b"data: [DONE]\n\n")
    assert raw.startswith(b": keep-alive\n\n: keep-alive\n\n")  # 1.5 s of start at 0.5 s per heartbeat
    assert time.monotonic() - began >= 1.5
    events = pod.events()
    assert events.index("ornith SIGTERM") < events.index("qwen started")
    # The engine ignored SIGTERM and outlived its parent: the launcher killed it before starting qwen.
    assert "processes of vLLM's group" in pod.stderr()
    assert pod.gpu_used_mib() < 2 * MIB  # qwen's alone
    models = pod.models()
    assert models["qwen"]["loaded"] and models["qwen"]["status"] == "loaded" and not models["ornith"]["loaded"]

    # Back, under the names Claude Code sends.
    for name, expected in (("claude-ornith", "ornith"), ("claude-qwen[1m]", "qwen"), ("ornith", "ornith")):
        status, raw = chat(pod, name, stream=False)
        assert status == 200 and answered_by(raw) == expected
    assert pod.swaps() == 4


def test_callers_for_the_same_model_share_one_swap_and_both_models_are_served(pods):
    pod = pods({"ornith": {}, "qwen": {"start_s": 1.5}})
    results: dict[str, list] = {"ornith": [], "qwen": []}

    def call(model: str) -> None:
        status, raw = chat(pod, model, headers={"x-standin-delay": "0.3"})
        results[model].append((status, answered_by(raw) if status == 200 else raw))

    threads = [threading.Thread(target=call, args=(model,))
               for model in ["qwen", "ornith", "qwen", "ornith", "qwen", "qwen", "ornith", "qwen"]]
    threads[0].start()
    # The others come while qwen loads: the first qwen caller's swap is under way.
    wait_until(lambda: "swap: ornith -> qwen" in pod.stderr(), 20, "the swap to qwen", pod.process)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results["qwen"]) == [(200, "qwen")] * 5
    assert sorted(results["ornith"]) == [(200, "ornith")] * 3
    # Every qwen caller shares one swap; the ornith callers that came while it was pending wait for the
    # swap back, after qwen served its queue: two swaps, not one per caller.
    assert pod.swaps() == 2, pod.stderr()
    assert pod.events().count("qwen started") == 1


def test_sigterm_ignored_is_followed_by_sigkill_to_the_group(pods):
    pod = pods({"ornith": {"ignore_term": True, "engine": True}, "qwen": {}})
    began = time.monotonic()
    status, raw = chat(pod, "qwen")
    assert status == 200 and answered_by(raw) == "qwen"
    assert time.monotonic() - began >= 1.0  # VL_SWAP_STOP=1
    assert "ornith SIGTERM ignored" in pod.events()
    assert "still running 1 s after SIGTERM: SIGKILL to the group" in pod.stderr()
    assert pod.gpu_used_mib() < 2 * MIB


def test_a_model_that_never_answers_fails_its_callers_and_the_pod_goes_back(pods):
    pod = pods({"ornith": {}, "qwen": {"never_healthy": True}}, env={"VL_SWAP_LOAD": "1.5"})
    status, raw = chat(pod, "qwen", stream=False)
    assert status == 200  # whitespace heartbeats went out first, then the error body
    error = json.loads(raw)["error"]
    assert "swap to model qwen failed" in error["message"] and "VL_SWAP_LOAD=1.5" in error["message"]
    status, raw = chat(pod, "ornith")
    assert status == 200 and answered_by(raw) == "ornith"
    assert pod.models()["ornith"]["loaded"]
    assert pod.events().count("ornith started") == 2
    assert pod.gpu_used_mib() < 2 * MIB  # the never-healthy qwen is gone


def test_a_model_that_exits_while_loading_fails_fast_and_the_pod_goes_back(pods):
    # heartbeats every 3 s: on this shared machine qwen's exit took longer than the usual 0.5 s under load
    pod = pods({"ornith": {}, "qwen": {"exit": 3, "start_s": 0.2}}, env={"VL_HEARTBEAT": "3"})
    began = time.monotonic()
    status, _, raw = request(pod.port, "POST", MESSAGES, {"model": "qwen", "max_tokens": 8, "stream": True,
                                                            "messages": [{"role": "user", "content": "hi"}]},
                             timeout=60)
    assert time.monotonic() - began < 10
    assert status == 503 and json.loads(raw)["type"] == "error"  # before any heartbeat: the API's own status
    assert "swap to model qwen failed: vLLM exited with code 3" in json.loads(raw)["error"]["message"]
    status, raw = chat(pod, "ornith")
    assert status == 200 and answered_by(raw) == "ornith"
    assert pod.process.poll() is None  # an exit during a swap is not the container's
    # Retries (SDKs and Claude Code retry errors) do not stop ornith again for another failing start.
    status, raw = chat(pod, "qwen", stream=False)
    assert status == 503 and "not tried again for" in json.loads(raw)["error"]["message"]
    assert pod.events().count("qwen started") == 1 and pod.events().count("ornith started") == 2


def test_when_the_previous_model_does_not_come_back_either_the_container_exits_with_its_code(pods):
    pod = pods({"ornith": {"exit_on_restart": 4}, "qwen": {"exit": 3}})
    status, raw = chat(pod, "qwen", stream=False)
    assert status == 503 and "swap to model qwen failed: vLLM exited with code 3" in json.loads(raw)["error"]["message"]
    assert pod.process.wait(15) == 4
    assert "ornith did not come back" in pod.stderr() and "vLLM (ornith) exited with code 4" in pod.stderr()


def test_when_the_previous_model_never_answers_again_the_container_exits_instead_of_a_503_for_ever(pods, tmp_path):
    # The wedge of issue 30: the fallback outlived VL_SWAP_LOAD, the bridge answered 503 for ever and the
    # status page said "serving". Now the launcher gives up on it: vLLM's group stopped, a non-zero exit.
    pod = pods({"ornith": {"on_restart": {"never_healthy": True}, "engine": True}, "qwen": {"exit": 3}},
               env={"VL_SWAP_LOAD": "1.5", "VL_CACHE_ROOT": str(tmp_path / "volume")})
    status, raw = chat(pod, "qwen", stream=False)
    assert status == 503 and "swap to model qwen failed" in json.loads(raw)["error"]["message"]
    assert pod.process.wait(20) == 6, pod.stderr()
    assert "ornith did not come back (vLLM did not answer its health check within VL_SWAP_LOAD=1.5 s)" in pod.stderr()
    assert "the container exits 6" in pod.stderr() and pod.gpu_used_mib() < MIB  # its engine child too
    state = json.loads(next((tmp_path / "volume" / "prebake").glob("*/state.json")).read_text())
    assert state["swapping"] is None and state["vllm"]["exit"]["code"] == 6
    assert "did not come back" in state["vllm"]["exit"]["why"]


def test_running_requests_finish_first_then_get_an_error_after_the_drain_time(pods):
    pod = pods({"ornith": {}, "qwen": {}}, env={"VL_SWAP_DRAIN": "1"})
    outcome = {}

    def long_one(rid: str, delay: str) -> None:
        outcome[rid] = request(pod.port, "POST", MESSAGES, {"model": "ornith", "max_tokens": 8, "stream": True,
                                                             "messages": [{"role": "user", "content": "hi"}]},
                               {"x-standin-delay": delay}, timeout=60)

    short = threading.Thread(target=long_one, args=("short", "0.9"))  # under VL_SWAP_DRAIN once qwen is asked
    long = threading.Thread(target=long_one, args=("long", "20"))
    short.start(), long.start()
    wait_until(lambda: len(get(pod.internal, "/_standin/active")[2]) == 2, 20, "both requests at ornith", pod.process)
    status, raw = chat(pod, "qwen")
    short.join(30), long.join(30)
    assert status == 200 and answered_by(raw) == "qwen"
    assert outcome["short"][0] == 200 and b"message_stop" in outcome["short"][2]  # finished before the swap
    long_status, _, long_raw = outcome["long"]
    assert long_status == 200 and long_raw.rstrip().endswith(b"}")
    error = long_raw.split(b"event: error\ndata: ")[1]
    assert "VL_SWAP_DRAIN=1 s" in json.loads(error)["error"]["message"]


CLAUDE_CODE = {"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}  # what it sends


def test_claude_codes_background_calls_for_the_other_model_never_swap(pods):
    pod = pods({"ornith": {}, "qwen": {}})
    hook = {"model": "claude-qwen", "max_tokens": 64, "thinking": {"type": "disabled"},
            "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
            "messages": [{"role": "user", "content": "title?"}], "stream": False}
    for _ in range(3):
        status, _, raw = request(pod.port, "POST", MESSAGES, hook, CLAUDE_CODE, timeout=30)
        assert status == 200 and json.loads(raw)["model"] == "ornith"
    assert pod.swaps() == 0
    # The same request with tools is the main loop's: it swaps.
    status, _, raw = request(pod.port, "POST", MESSAGES, dict(hook, tools=[{"name": "t", "input_schema": {}}]),
                             CLAUDE_CODE, timeout=30)
    assert status == 200 and json.loads(raw)["model"] == "qwen" and pod.swaps() == 1


def test_an_sdks_structured_output_request_gets_the_model_it_names(pods):
    """Only Claude Code's background calls are answered by the loaded model: an SDK's JSON-output request
    without thinking has the same shape, and must get the model it asked for."""
    pod = pods({"ornith": {}, "qwen": {}})
    structured = {"model": "qwen", "max_tokens": 64, "thinking": {"type": "disabled"},
                  "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
                  "messages": [{"role": "user", "content": "extract"}], "stream": False}
    status, _, raw = request(pod.port, "POST", MESSAGES, structured, {"user-agent": "Anthropic/Python 0.70.0"},
                             timeout=30)
    assert status == 200 and json.loads(raw)["model"] == "qwen" and pod.swaps() == 1


def test_vllm_dying_outside_a_swap_ends_the_container_with_its_code(pods):
    pod = pods({"ornith": {}, "qwen": {}})
    chat(pod, "qwen")
    qwen_pid = int(next(line.split()[2] for line in pod.lines() if " qwen " in line and line.endswith("started")))
    os.kill(qwen_pid, signal.SIGKILL)
    assert pod.process.wait(15) == 128 + 9
    assert "vLLM (qwen) exited with signal SIGKILL" in pod.stderr()


def test_a_dead_bridge_still_stops_vllm_and_the_container(pods):
    pod = pods({"ornith": {"engine": True}, "qwen": {}})
    bridge = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pod.process.pid)], capture_output=True,
                            text=True).stdout
    os.kill(int(next(line.split()[0] for line in bridge.splitlines() if "bridge.py" in line)), signal.SIGKILL)
    assert pod.process.wait(15) == 5
    assert "ornith SIGTERM" in pod.events() and pod.gpu_used_mib() < MIB  # the engine child too


def test_signals_reach_the_vllm_a_swap_started(pods):
    pod = pods({"ornith": {}, "qwen": {}})
    chat(pod, "qwen")
    pod.process.send_signal(signal.SIGUSR1)
    wait_until(lambda: "qwen SIGUSR1" in pod.events(), 5, "qwen's SIGUSR1", pod.process)
    assert "ornith SIGUSR1" not in pod.events()
    assert pod.stop() == 0 and "qwen SIGTERM" in pod.events()  # docker stop: vLLM's own exit code


def test_docker_stop_during_a_swap_stops_everything(pods):
    pod = pods({"ornith": {}, "qwen": {"start_s": 5}})

    def waiting_caller() -> None:
        try:
            chat(pod, "qwen")
        except (OSError, http.client.HTTPException):  # the pod went away under it
            pass

    caller = threading.Thread(target=waiting_caller)
    caller.start()
    wait_until(lambda: "qwen started" in pod.events(), 20, "qwen's start", pod.process)  # qwen is loading
    began = time.monotonic()
    pod.process.send_signal(signal.SIGTERM)
    pod.process.wait(10)
    assert time.monotonic() - began < 5
    caller.join(10)
    assert "qwen SIGTERM" in pod.events()  # the loading vLLM got docker's signal; the fixture checks leftovers


def test_during_a_swap_the_503_names_the_model_replaced_and_the_one_coming(pods):
    pod = pods({"ornith": {}, "qwen": {"start_s": 2}})
    caller = threading.Thread(target=chat, args=(pod, "qwen"))
    caller.start()
    messages, deadline = [], time.monotonic() + 20
    while caller.is_alive() and time.monotonic() < deadline:
        status, _, raw = request(pod.port, "GET", "/health")
        if status == 503:
            messages.append(json.loads(raw)["error"]["message"])
        time.sleep(0.05)
    caller.join(20)
    assert messages and all("ornith -> qwen" in message for message in messages), messages


def test_during_a_swap_a_request_that_names_no_model_gets_the_503_in_its_apis_shape(pods):
    """count_tokens cannot wait for a swap with heartbeats: its 503 is Anthropic's error, typed as Anthropic types a
    503 (overloaded_error), written by the one writer every other answer goes through."""
    pod = pods({"ornith": {}, "qwen": {"start_s": 2}})
    caller = threading.Thread(target=chat, args=(pod, "qwen"))
    caller.start()
    refused, deadline = [], time.monotonic() + 20
    while caller.is_alive() and time.monotonic() < deadline and not refused:
        status, _, raw = request(pod.port, "POST", "/v1/messages/count_tokens", {
            "model": "claude-opus-4-8", "messages": [{"role": "user", "content": "hi"}]})
        if status == 503:
            refused.append(json.loads(raw))
        time.sleep(0.05)
    caller.join(20)
    assert refused and refused[0]["type"] == "error" and refused[0]["error"]["type"] == "overloaded_error", refused
    assert "ornith -> qwen" in refused[0]["error"]["message"]


def test_without_swapping_docker_stop_leaves_no_process_of_vllms_group(pods):
    # Outside a swap the launcher signalled only vLLM's main process: its engine child, which ignores SIGTERM
    # and outlives its parent, stayed (tini reaps it in a container; a local run kept it, holding the GPU).
    pod = pods({"ornith": {"engine": True}}, env={"VL_SWAP": "off"})
    assert pod.stop() == 0 and "ornith SIGTERM" in pod.events()
    assert pod.kill_leftovers() == [], pod.stderr()


def test_without_swapping_a_dead_bridge_leaves_no_process_of_vllms_group(pods):
    pod = pods({"ornith": {"engine": True}}, env={"VL_SWAP": "off"})
    bridge = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pod.process.pid)], capture_output=True,
                            text=True).stdout
    os.kill(int(next(line.split()[0] for line in bridge.splitlines() if "bridge.py" in line)), signal.SIGKILL)
    assert pod.process.wait(15) == 5
    assert pod.kill_leftovers() == [], pod.stderr()


def test_claude_codes_own_names_go_to_the_loaded_model_and_never_swap(pods):
    """claude-opus-4-8 (Claude Code's default) and any other claude-* name no model of the set serves: the loaded
    model answers, in a main-loop request as in a background call, small or large; the set's names still swap.
    The stand-ins check names as vLLM does (404 otherwise)."""
    pod = pods({"ornith": {}, "qwen": {}}, {"STANDIN_STRICT_NAMES": "1"})
    tools = [{"name": "t", "description": "x" * 300_000, "input_schema": {}}]  # a main-loop body past 256 KiB
    for name in ("claude-opus-4-8", "claude-haiku-4-5-20251001", "claude-sonnet-9[1m]"):
        for extra in ({}, {"tools": tools}):
            status, _, raw = request(pod.port, "POST", MESSAGES, {
                "model": name, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}], **extra}, timeout=30)
            assert status == 200 and json.loads(raw)["model"] == "ornith", raw[:300]
    assert pod.swaps() == 0
    status, raw = chat(pod, "claude-qwen")
    assert status == 200 and answered_by(raw) == "qwen" and pod.swaps() == 1
    status, _, raw = request(pod.port, "POST", MESSAGES, {"model": "claude-opus-4-8", "max_tokens": 16,
                                                           "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and json.loads(raw)["model"] == "qwen" and pod.swaps() == 1  # now qwen is loaded
    status, _, _ = request(pod.port, "POST", "/v1/messages/count_tokens", {
        "model": "claude-opus-4-8", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and pod.swaps() == 1
    status, _, raw = request(pod.port, "POST", MESSAGES, {"model": "gpt-4o", "max_tokens": 16,
                                                           "messages": [{"role": "user", "content": "hi"}]})
    assert status == 404 and b"The model `gpt-4o` does not exist." in raw and pod.swaps() == 1


def test_a_body_that_names_two_models_never_swaps(pods):
    """Issue 56: `model` qwen, then `model` ornith in a later TCP segment. vLLM reads the last one; the bridge used to
    swap by the first (evicting the model other clients use) and vLLM answered 404. The body is read whole before a
    swap, and refused (400): no swap."""
    import socket

    pod = pods({"ornith": {}, "qwen": {"start_s": 0.5}}, {"STANDIN_STRICT_NAMES": "1"})
    head = b'{"model": "qwen", "stream": false, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]'
    tail = b', "model": "ornith"}'
    with socket.create_connection(("127.0.0.1", pod.port), timeout=30) as conn:
        conn.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n" % (len(head) + len(tail)) + head)
        conn.sendall(tail)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status == 400 and b'\\"model\\" more than once' in answer, answer[-400:]
    assert pod.swaps() == 0 and pod.models()["ornith"]["loaded"]
