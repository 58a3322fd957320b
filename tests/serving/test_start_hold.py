"""Requests that arrive while vLLM starts (VL_START_HOLD), through the real launcher and bridge with the stand-in
vLLM that starts phase by phase (phased_vllm.py): held with heartbeats and answered once vLLM serves, /health
503 meanwhile, the count on the status page; past the bound, or when the start fails, the API's error."""

from __future__ import annotations

import json
import threading
import time

import anthropic

from prebake_testing.net import get, request, wait_until
from prebake_testing.pods import KEY, Pod

AUTH = {"authorization": f"Bearer {KEY}"}
# What Claude Code sends (DESIGN.md): streaming /v1/messages?beta=true, its beta header, a Bearer key
CLAUDE_CODE = {**AUTH, "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}
CLAUDE_BODY = {"model": "claude-opus-5-5", "max_tokens": 32000, "stream": True,
               "system": [{"type": "text", "text": "You are Claude Code. " * 400}],
               "messages": [{"role": "user", "content": "say hi"}],
               "tools": [{"name": f"Tool{i}", "description": "d" * 500, "input_schema": {"type": "object"}}
                         for i in range(24)]}


def held_count(pod: Pod) -> int:
    return pod.status()[1]["held_for_start"]


def in_thread(answers: dict, name: str, call) -> threading.Thread:
    def run() -> None:
        try:
            answers[name] = call()
        except Exception as err:  # noqa: BLE001 - the test reads it
            answers[name] = err
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_requests_sent_while_vllm_starts_are_held_and_answered_once_it_serves(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    answers: dict = {}
    try:
        pod.wait_phase("starting", timeout=5)
        threads = [
            in_thread(answers, "claude", lambda: request(pod.port, "POST", "/v1/messages?beta=true", CLAUDE_BODY,
                                                         CLAUDE_CODE, timeout=60)),
            in_thread(answers, "openai", lambda: request(pod.port, "POST", "/v1/chat/completions",
                                                         {"model": "ornith"}, AUTH, timeout=60)),
            # the real SDK, no retries: one request, held, then its answer
            in_thread(answers, "sdk", lambda: anthropic.Anthropic(
                base_url=f"http://127.0.0.1:{pod.port}", api_key="unused", default_headers=AUTH, max_retries=0,
                timeout=60).messages.create(model="ornith", max_tokens=5, messages=[{"role": "user", "content": "hi"}])),
        ]
        wait_until(lambda: held_count(pod) == 3, 10, "three requests held on the status page")
        assert get(pod.port, "/health", AUTH)[0] == 503  # RunPod reads it: not serving yet
        text = pod.status(path="/prebake/status.txt")[1].decode()
        assert "held: 3 request(s) waiting for vLLM's start" in text
        for step in range(1, 5):
            pod.go(step)
        for thread in threads:
            thread.join(30)
        status, _, raw = answers["claude"]
        # heartbeats while held (Anthropic's ping, in the stream's form), then vLLM's answer
        assert status == 200 and raw.startswith(b"event: ping") and b"event: message_stop" in raw, raw[-500:]
        status, _, raw = answers["openai"]
        assert status == 200 and raw.startswith(b"\n") and json.loads(raw)["object"] == "chat.completion"
        assert isinstance(answers["sdk"], anthropic.types.Message), answers["sdk"]
        assert held_count(pod) == 0 and get(pod.port, "/health", AUTH)[0] == 200
    finally:
        _, _, err = pod.stop()
    assert "while vLLM started; relaying" in err


def test_past_the_bound_the_client_gets_model_loading(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_START_HOLD": "0.05"})  # 3 s
    try:
        pod.wait_phase("starting", timeout=5)
        status, _, raw = request(pod.port, "POST", "/v1/messages", {"model": "ornith", "stream": True,
                                                                   "max_tokens": 5}, AUTH, timeout=30)
        assert status == 200 and raw.startswith(b"event: ping")  # held, with heartbeats, then the error event
        error = json.loads(raw.split(b"event: error\ndata: ")[1])
        assert error["error"]["message"].startswith("model loading: vLLM is still starting")
        assert "VL_START_HOLD" in error["error"]["message"]
        assert held_count(pod) == 0
    finally:
        _, _, err = pod.stop()
    assert "answered 503" in err


def test_no_hold_with_zero(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_START_HOLD": "0"})
    try:
        pod.wait_phase("starting", timeout=5)
        status, headers, raw = request(pod.port, "POST", "/v1/chat/completions", {"model": "ornith"}, AUTH)
        assert status == 503 and headers["retry-after"] == "10" and b"model loading" in raw
    finally:
        pod.stop()


def test_a_start_that_fails_answers_the_held_requests(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY}, mode="die")
    answers: dict = {}
    pod.wait_phase("starting", timeout=5)
    thread = in_thread(answers, "openai", lambda: request(pod.port, "POST", "/v1/chat/completions",
                                                          {"model": "ornith", "stream": True}, AUTH, timeout=60))
    wait_until(lambda: held_count(pod) == 1, 10, "the request held")
    pod.go(1)  # vLLM dies while loading its weights
    code, _, err = pod.finish()
    thread.join(30)
    assert code == 3, err[-2000:]
    status, _, raw = answers["openai"]
    assert status == 200 and raw.startswith(b": keep-alive")
    assert b"vLLM's start on this pod did not finish" in raw and raw.endswith(b"data: [DONE]\n\n"), raw[-400:]


def test_a_request_through_the_router_gets_503_at_once_so_the_router_tries_another_pod(tmp_path):
    """The router pod (routerpod/router.py) marks every request: a pod still starting refuses it instead of holding
    it, since once heartbeats are sent nginx can no longer move the request to a pod that serves."""
    from routerpod.router import NO_START_HOLD_HEADER

    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        pod.wait_phase("starting", timeout=5)
        status, headers, raw = request(pod.port, "POST", "/v1/messages?beta=true", CLAUDE_BODY,
                                       {**CLAUDE_CODE, NO_START_HOLD_HEADER: "1"}, timeout=10)
        assert status == 503 and b"model loading" in raw.lower() and held_count(pod) == 0, (status, raw[:300])
    finally:
        pod.stop()


def test_a_request_whose_body_comes_slowly_is_counted_held_from_its_first_byte(tmp_path):
    """A body sent a few bytes at a time while vLLM starts (`stream` not yet seen) is waiting for the start all the
    same: the status page counts it, and it is answered once vLLM serves."""
    import socket

    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    body = json.dumps({"model": "ornith", "messages": [{"role": "user", "content": "hi " * 200}],
                       "stream": False}).encode()
    client = socket.create_connection(("127.0.0.1", pod.port), timeout=30)
    try:
        pod.wait_phase("starting", timeout=5)
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: pod\r\nAuthorization: Bearer " + KEY.encode()
                       + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                       + b"\r\nConnection: close\r\n\r\n" + body[:40])
        wait_until(lambda: held_count(pod) == 1, 10, "the slow request counted as held")
        assert "held: 1 request(s) waiting" in pod.status(path="/prebake/status.txt")[1].decode()
        client.sendall(body[40:])
        for step in range(1, 5):
            pod.go(step)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b'"chat.completion"' in answer, answer[-500:]
        assert held_count(pod) == 0
    finally:
        client.close()
        pod.stop()


def test_once_a_sessions_hold_ran_out_its_non_streaming_retry_gets_503_at_once(tmp_path):
    """Claude Code does not show a stream's error event: it retries the request at once without streaming, and shows
    what that retry gets. Held, the retry's heartbeats would commit a 200 that it prints as "empty or malformed";
    so that session's non-streaming requests get the hold's error as a 503 at once, while another session's are
    still held (test_claude_code_texts.py checks what the real CLIs print)."""
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_START_HOLD": "0.05"})  # 3 s
    session = {**CLAUDE_CODE, "x-claude-code-session-id": "5e55101-a"}
    retry = {key: value for key, value in CLAUDE_BODY.items() if key != "stream"}
    answers: dict = {}
    try:
        pod.wait_phase("starting", timeout=5)
        status, _, raw = request(pod.port, "POST", "/v1/messages?beta=true", CLAUDE_BODY, session, timeout=30)
        assert status == 200 and b"event: error" in raw and b"VL_START_HOLD" in raw  # held, then the error event
        began = time.monotonic()
        status, _, raw = request(pod.port, "POST", "/v1/messages?beta=true", retry, session, timeout=30)
        assert status == 503 and time.monotonic() - began < 3, (status, raw[:300])  # not held again
        error = json.loads(raw)["error"]
        assert error["message"].startswith("model loading: vLLM is still starting")
        assert "VL_START_HOLD" in error["message"]
        other = {**CLAUDE_CODE, "x-claude-code-session-id": "5e55101-b"}
        thread = in_thread(answers, "other", lambda: request(pod.port, "POST", "/v1/messages?beta=true", retry, other,
                                                             timeout=30))
        wait_until(lambda: held_count(pod) == 1, 10, "another session's non-streaming request held")
        thread.join(30)
        status, _, raw = answers["other"]
        assert status == 200 and raw.startswith(b"\n") and b"VL_START_HOLD" in raw  # held: heartbeats, the error body
    finally:
        _, _, err = pod.stop()
    assert err.count("answered 503 at once") == 1, err[-2000:]


# --- hostile round 6 (issue 56): `stream` past the bridge's 1 MiB read-ahead -----------------------------------------

def long_session(size: int, **members) -> dict:
    """A long Claude Code session's body: `stream` last, as Claude Code writes it, past `size` bytes of messages."""
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 4000} for i in range(size // 4000)]
    body = {key: value for key, value in CLAUDE_BODY.items() if key != "stream"}
    return {**body, "messages": [*turns, {"role": "user", "content": "go on"}], **members}


def test_a_long_held_request_gets_the_framing_of_its_stream_however_far_it_stands(tmp_path):
    """1.5 MiB of session before `stream` (a 1M-context pod sees several MiB): held while vLLM starts, it gets
    Server-Sent Events, not a JSON body with whitespace heartbeats."""
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    answers: dict = {}
    try:
        pod.wait_phase("starting", timeout=5)
        body = long_session(3 << 19, stream=True)
        assert len(json.dumps(body)) > 3 << 19 and list(body)[-1] == "stream"
        thread = in_thread(answers, "claude", lambda: request(pod.port, "POST", "/v1/messages?beta=true", body,
                                                              CLAUDE_CODE, timeout=60))
        wait_until(lambda: held_count(pod) == 1, 10, "the long request held")
        for step in range(1, 5):
            pod.go(step)
        thread.join(30)
        status, headers, raw = answers["claude"]
        assert status == 200 and headers["content-type"].startswith("text/event-stream"), (headers, raw[:200])
        assert raw.startswith(b"event: ping") and b"event: message_stop" in raw, raw[-300:]
    finally:
        pod.stop()


def test_the_503_at_once_rule_reads_the_real_stream_of_a_long_body(tmp_path):
    """After a session's hold ran out, its non-streaming requests get 503 at once: a streaming one whose `stream`
    lies past 1 MiB is held as a streaming request (not taken for a non-streaming one)."""
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_START_HOLD": "0.05"})  # 3 s
    session = {**CLAUDE_CODE, "x-claude-code-session-id": "5e55101-c"}
    try:
        pod.wait_phase("starting", timeout=5)
        status, _, raw = request(pod.port, "POST", "/v1/messages?beta=true", CLAUDE_BODY, session, timeout=30)
        assert status == 200 and b"event: error" in raw  # the session's hold ran out
        status, headers, raw = request(pod.port, "POST", "/v1/messages?beta=true", long_session(3 << 19, stream=True),
                                       session, timeout=30)
        assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, raw[:300])
        assert raw.startswith(b"event: ping") and b"VL_START_HOLD" in raw
    finally:
        _, _, err = pod.stop()
    assert "answered 503 at once" not in err, err[-2000:]
