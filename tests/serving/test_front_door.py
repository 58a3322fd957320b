"""The bridge faces whatever reaches its port: it only ever connects to vLLM, refuses request-target forms
other than a path, bounds a request's head in size and time, and answers every refusal in the API's
JSON error format without a traceback."""

from __future__ import annotations

import json

import pytest

from prebake_testing.servers import start_bridge
from prebake_testing.rawhttp import Listener, body_of, exchange, status_of


@pytest.fixture(scope="module")
def elsewhere():
    listener = Listener()
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def door(standin):
    server = start_bridge(standin.port)
    yield server
    assert "Traceback" not in server.stop()


@pytest.mark.parametrize("target", [
    "*@127.0.0.1:{port}/v1/models",  # yarl read "upstream*@host:port" as userinfo and host: SSRF
    "http://127.0.0.1:{port}/v1/models",
    "//127.0.0.1:{port}/v1/models",
    "*",
    "127.0.0.1:{port}",
    "@127.0.0.1:{port}/x",
    "?x=1",
])
def test_only_paths_reach_vllm_and_nothing_else_is_contacted(door, elsewhere, target):
    before = elsewhere.connections
    raw = exchange(door.port, f"GET {target.format(port=elsewhere.port)} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    status = status_of(raw)
    assert elsewhere.connections == before, raw
    assert b"ELSEWHERE" not in raw
    # "//host/path" is a path: relayed to vLLM itself, which answers 404
    assert status is not None and 400 <= status < 500, raw
    if status != 404:
        assert "error" in json.loads(body_of(raw))


def test_connect_and_options_star_get_a_4xx(door, elsewhere):
    for line in (f"CONNECT 127.0.0.1:{elsewhere.port} HTTP/1.1", "OPTIONS * HTTP/1.1"):
        raw = exchange(door.port, f"{line}\r\nhost: x\r\n\r\n".encode())
        assert status_of(raw) == 400 and json.loads(body_of(raw))["error"]["code"] == 400
    assert elsewhere.connections == 0


def test_a_long_target_is_414_and_long_headers_are_431(door):
    raw = exchange(door.port, b"GET /v1/models?" + b"a" * 20000 + b" HTTP/1.1\r\nhost: x\r\n\r\n")
    assert status_of(raw) == 414
    raw = exchange(door.port, b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: " + b"b" * 70000 + b"\r\n\r\n")
    assert status_of(raw) == 431
    many = b"".join(b"x-h%d: 1\r\n" % i for i in range(300))
    raw = exchange(door.port, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n" + many + b"\r\n")
    assert status_of(raw) == 431 and json.loads(body_of(raw))["type"] == "error"  # Anthropic's shape there


def test_malformed_requests_get_a_json_400(door):
    for data in (b"GARBAGE\r\n\r\n", b"GET /\xff HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n"):
        raw = exchange(door.port, data)
        assert status_of(raw) == 400 and "error" in json.loads(body_of(raw)), raw


def echoed(port: int, data: bytes) -> dict:
    raw = exchange(port, data)
    assert status_of(raw) == 200, raw
    answer = json.loads(body_of(raw))
    answer["headers"] = {name: value for name, value in answer["headers"]}  # noqa: C416 - last wins
    return answer


def test_vllm_receives_what_the_client_sent_and_the_forwarding_headers_the_bridge_decides(door):
    seen = echoed(door.port, b"GET /_standin/echo HTTP/1.1\r\nhost: pod-8080.proxy.example\r\n"
                             b"x-forwarded-for: 6.6.6.6\r\nx-forwarded-proto: https\r\nforwarded: for=6.6.6.6\r\n"
                             b"x-real-ip: 6.6.6.6\r\nx-mine: kept\r\n\r\n")
    headers = seen["headers"]
    assert headers["host"] == "pod-8080.proxy.example"  # vLLM's redirects point where the client can follow
    assert headers["x-forwarded-for"] == "127.0.0.1"  # the bridge's peer, not the client's claim
    assert "6.6.6.6" not in json.dumps(seen) and "x-forwarded-proto" not in headers and "forwarded" not in headers
    assert headers["x-mine"] == "kept"


def test_chunked_trailers_never_become_headers(door):
    seen = echoed(door.port, b"POST /_standin/echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
                             b"5\r\nhello\r\n0\r\nx-trailer: evil\r\nauthorization: Bearer forged\r\n\r\n")
    assert seen["body_length"] == 5
    assert "x-trailer" not in seen["headers"] and "authorization" not in seen["headers"]
