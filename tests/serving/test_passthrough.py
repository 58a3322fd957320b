"""Everything that is not a generation passes through with vLLM's status, headers and body; before vLLM
answers its health check the bridge says "model loading" instead of the proxy's bare 502."""

import json

import openai
import pytest

from prebake_testing.servers import StandIn, start_bridge
from prebake_testing.net import free_port, get, request, wait_healthy
from prebake_testing.clients import openai_client
HOP = {"connection", "keep-alive", "transfer-encoding"}


def exchange(port: int, method: str, path: str, body=None) -> tuple[int, dict, bytes]:
    status, headers, raw = request(port, method, path, body, {"x-standin-id": "same"})
    return status, {k: v for k, v in headers.items() if k not in HOP}, raw


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/v1/models", None),
    ("GET", "/health", None),
    ("GET", "/metrics", None),
    ("POST", "/tokenize", {"model": "ornith", "prompt": "one two three"}),
    ("POST", "/v1/messages/count_tokens", {"model": "ornith", "messages": [{"role": "user", "content": "a b"}]}),
    ("GET", "/v1/no/such/path?x=1&y=%20", None),
    ("DELETE", "/v1/models", None),
    ("HEAD", "/v1/models", None),
])
def test_other_paths_pass_through_intact(standin, bridge, method, path, body):
    direct = exchange(standin.port, method, path, body)
    relayed = exchange(bridge.port, method, path, body)
    assert relayed[0] == direct[0]
    direct[1].pop("date"), relayed[1].pop("date")  # the second may tick between the two requests
    assert relayed[1] == direct[1]
    assert relayed[2] == direct[2]


def test_request_headers_and_query_reach_vllm_unchanged(standin, bridge):
    # The stand-in answers /v1/models with the x-standin-id it received.
    sent = "héader ✓".encode()  # UTF-8 bytes in a header value
    status, headers, _ = request(bridge.port, "GET", "/v1/models?a=1",
                                 headers={"x-standin-id": sent, "authorization": "Bearer sk-1"})
    assert status == 200 and headers["x-request-id"].encode("latin-1") == sent


def test_sdk_lists_models_through_the_bridge(bridge):
    assert [m.id for m in openai_client(bridge).models.list()] == ["ornith"]


def test_until_vllm_is_healthy_the_bridge_answers_model_loading():
    upstream_port = free_port()
    bridge = start_bridge(upstream_port, wait_ready=False)  # nothing listens upstream yet: vLLM is loading
    try:
        for path in ("/health", "/v1/models"):
            status, headers, raw = request(bridge.port, "GET", path)
            assert status == 503 and headers["retry-after"] == "10"
            assert json.loads(raw)["error"]["message"].startswith("model loading: vLLM is still starting")
        status, _, raw = request(bridge.port, "POST", "/v1/messages", {"model": "ornith"})
        assert status == 503 and json.loads(raw)["type"] == "error"  # Anthropic's error shape on its path
        with pytest.raises(openai.InternalServerError, match="model loading"):
            openai_client(bridge).models.list()
        standin = StandIn(upstream_port)  # vLLM finishes loading
        try:
            wait_healthy(bridge.port, bridge.process, timeout=5)
            assert get(bridge.port, "/v1/models")[0] == 200
        finally:
            standin.stop()
        assert "vLLM answers at" in bridge.stop()
    finally:
        bridge.stop()


def test_vllm_gone_after_start_is_a_clear_502():
    dead = free_port()
    lone = start_bridge(dead, wait_ready=False)
    try:
        # Force the ready state by starting and stopping a stand-in on the port.
        standin = StandIn(dead)
        wait_healthy(lone.port, lone.process, timeout=5)
        standin.stop()
        status, _, raw = request(lone.port, "POST", "/v1/chat/completions", {"model": "ornith", "stream": True})
        assert status == 502
        assert "could not reach vLLM" in json.loads(raw)["error"]["message"]
    finally:
        lone.stop()
