"""What a hostile or unlucky client can do to the bridge: none of it makes the bridge answer 500 or log a
traceback, and every error the bridge makes itself is in the client's API format."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest

from prebake_testing.net import request
from prebake_testing.servers import start_bridge
from prebake_testing.rawhttp import body_of, exchange, status_of

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def hostile(standin):
    server = start_bridge(standin.port, extra=["--head-timeout", "1", "--body-timeout", "1"])
    yield server
    log = server.stop()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log


@pytest.mark.parametrize("stream", ["yes", "True", 1, 1.0, "on"])
def test_a_stream_vllm_reads_as_true_gets_sse_heartbeats(standin, hostile, stream):
    status, headers, raw = request(hostile.port, "POST", CHAT, {"model": "ornith", "stream": stream},
                                   {"x-standin-delay": "1.2"})
    assert status == 200 and raw.startswith(b": keep-alive\n\n") and raw.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("body", [
    b"[" * 200000 + b"]" * 200000, b'{"stream": true, "x": ' + b"[" * 100000, b"{" * 50000, b"\xff\xfe{}",
    b'{"stream": {"stream": true}}', b"", b"null", b'{"stream": "\\ud800"}',
])
def test_odd_bodies_get_vllms_answer_not_a_500(standin, hostile, body):
    status, headers, raw = request(hostile.port, "POST", CHAT, body)
    assert status < 500 and headers.get("x-standin") == "1", raw[:300]


def test_a_client_leaving_mid_upload_costs_nothing(standin, hostile):
    with socket.create_connection(("127.0.0.1", hostile.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-standin-id: leave-upload\r\n"
                     b"content-length: 1000000\r\n\r\n" + b"{" * 1000)
        standin.wait_held("leave-upload")  # the upload is streaming to vLLM when the client leaves
    assert standin.event("leave-upload")["event"] == "cancelled"  # and vLLM saw it go
    assert request(hostile.port, "GET", "/v1/models")[0] == 200


def test_half_sent_requests_get_408_in_the_api_format(hostile):
    began = time.monotonic()
    raw = exchange(hostile.port, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"a\":", 10)
    assert status_of(raw) == 408 and json.loads(body_of(raw))["type"] == "error"  # Anthropic's shape
    raw = exchange(hostile.port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-le", 10)
    assert status_of(raw) == 408 and json.loads(body_of(raw))["error"]["code"] == 408
    assert time.monotonic() - began < 6


def test_vllm_breaking_off_after_heartbeats_ends_in_the_apis_error_form(standin, hostile):
    status, _, raw = request(hostile.port, "POST", CHAT, {"model": "ornith", "stream": True},
                             {"x-standin-delay": "0.5", "x-standin-break": "1"})
    events = raw.split(b"\n\n")
    assert status == 200 and b"data: [DONE]" in events[-2:]
    error = json.loads([e for e in events if e.startswith(b'data: {"error"')][0][6:])
    assert "broke off" in error["error"]["message"]
    status, _, raw = request(hostile.port, "POST", "/v1/messages", {"model": "ornith", "stream": True},
                             {"x-standin-delay": "0.5", "x-standin-break": "1"})
    assert b"event: error\ndata: " in raw and b"broke off" in raw


def test_a_non_streaming_answer_cut_mid_body_is_a_cut_connection(hostile):
    # Before the first heartbeat: vLLM's own sized answer, cut as vLLM cut it.
    with pytest.raises(Exception):  # http.client: IncompleteRead, as from vLLM itself
        request(hostile.port, "POST", CHAT, {"model": "ornith"}, {"x-standin-delay": "0.1", "x-standin-break": "1"})
    assert request(hostile.port, "GET", "/v1/models")[0] == 200


def test_a_non_streaming_answer_cut_after_heartbeats_is_a_cut_or_an_error_body(hostile):
    # After whitespace heartbeats (status 200 sent): when aiohttp reports the break before any of vLLM's
    # bytes were relayed, the client reads a JSON error; otherwise the connection is cut.
    try:
        status, _, raw = request(hostile.port, "POST", CHAT, {"model": "ornith"},
                                 {"x-standin-delay": "1.2", "x-standin-break": "1"})
    except Exception:  # noqa: BLE001 - http.client's IncompleteRead
        return
    assert status == 200 and "broke off" in json.loads(raw)["error"]["message"]


def stream_in_thread(port: int, body: dict, headers: dict) -> dict:
    out: dict = {}

    def run() -> None:
        try:
            out["answer"] = request(port, "POST", CHAT, body, headers, timeout=20)
        except Exception as err:  # noqa: BLE001
            out["error"] = err
    thread = threading.Thread(target=run)
    thread.start()
    out["thread"] = thread
    return out


def test_sigterm_mid_request_ends_it_in_the_apis_format_without_a_traceback(standin):
    bridge = start_bridge(standin.port, heartbeat=0.3)
    streaming = stream_in_thread(bridge.port, {"model": "ornith", "stream": True},
                                 {"x-standin-delay": "8", "x-standin-id": "sigterm-1"})
    waiting = stream_in_thread(bridge.port, {"model": "ornith", "stream": True},
                               {"x-standin-delay": "8", "x-standin-id": "sigterm-2"})
    standin.wait_held("sigterm-1", "sigterm-2")  # both are in vLLM's hands when the bridge is told to stop
    bridge.process.send_signal(signal.SIGTERM)
    log = bridge.stop()
    for out in (streaming, waiting):
        out["thread"].join(20)
        status, _, raw = out["answer"]
        assert status == 200 and b"shutting down" in raw and raw.endswith(b"data: [DONE]\n\n"), raw[-300:]
    assert "Traceback" not in log and "Exception in ASGI" not in log, log
