"""With VLLM_API_KEY set, the bridge lets in only requests that carry the key, the way each API's clients
send it, and refuses the rest itself (401 in the API's error format) before anything reaches vLLM."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from prebake_testing.net import request
from prebake_testing.servers import start_bridge
from prebake_testing.clients import anthropic_client, openai_client

KEY = "sk-pod-3f9a-secret"
CHAT = {"model": "ornith", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def locked(standin):
    server = start_bridge(standin.port, key=KEY)
    yield server
    log = server.stop()
    assert KEY not in log  # the key is never logged
    assert "Traceback" not in log


def seen(standin, rid: str) -> bool:
    return any(event["id"] == rid for event in standin.events())


@pytest.mark.parametrize("headers", [
    {}, {"authorization": "Bearer wrong"}, {"x-api-key": "wrong"}, {"authorization": KEY},
    {"authorization": f"Basic {KEY}"}, {"x-api-key": KEY[:-1]}, {"authorization": "Bearer "},
])
def test_requests_without_the_key_are_refused_before_vllm(standin, locked, headers):
    rid = f"refused-{len(standin.events())}-{sorted(headers.items())}"
    status, head, raw = request(locked.port, "POST", "/v1/chat/completions", CHAT, {"x-standin-id": rid, **headers})
    assert status == 401 and head["www-authenticate"] == "Bearer"
    # Claude Code gives up on a 401 at once only with this header (it retried a plain one for ~3 minutes)
    assert head["x-should-retry"] == "false"
    message = json.loads(raw)["error"]["message"]
    assert "requires an API key" in message and "VLLM_API_KEY" in message
    sent = any(value.strip().lower().startswith("bearer ") and value.split(None, 1)[1:] or name == "x-api-key"
               for name, value in headers.items())
    assert message.startswith("wrong API key" if sent else "no API key sent"), message
    status, _, raw = request(locked.port, "POST", "/v1/messages", CHAT, {"x-standin-id": rid, **headers})
    assert status == 401 and json.loads(raw)["error"]["type"] == "authentication_error"  # Anthropic's shape
    for path in ("/v1/models", "/metrics", "/tokenize", "/v1/messages/count_tokens", "/no/such/path"):
        assert request(locked.port, "GET", path, headers=headers)[0] == 401
    assert not seen(standin, rid)


@pytest.mark.parametrize("headers", [{"authorization": f"Bearer {KEY}"}, {"authorization": f"bearer  {KEY}"},
                                     {"x-api-key": KEY}, {"x-api-key": "wrong", "authorization": f"Bearer {KEY}"}])
def test_the_key_is_accepted_as_each_api_sends_it(standin, locked, headers):
    status, _, _ = request(locked.port, "POST", "/v1/chat/completions", CHAT, {"x-standin-id": "in", **headers})
    assert status == 200


def test_health_stays_open_for_runpods_checks(locked):
    assert request(locked.port, "GET", "/health")[0] == 200


def test_the_sdks_and_claude_codes_variables_get_in(locked):
    key = openai.OpenAI(base_url=locked.url + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in key.models.list()] == ["ornith"]
    with pytest.raises(openai.AuthenticationError, match="requires an API key"):
        openai_client(locked).models.list()
    # ANTHROPIC_API_KEY (x-api-key) and ANTHROPIC_AUTH_TOKEN (Bearer), as Claude Code sends them
    for client in (anthropic.Anthropic(base_url=locked.url, api_key=KEY, max_retries=0),
                   anthropic.Anthropic(base_url=locked.url, auth_token=KEY, max_retries=0)):
        message = client.messages.create(model="ornith", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
        assert message.content[0].text
    with pytest.raises(anthropic.AuthenticationError):
        anthropic_client(locked).messages.create(model="ornith", max_tokens=8,
                                                 messages=[{"role": "user", "content": "hi"}])


def test_without_a_key_the_bridge_says_it_is_open(standin):
    server = start_bridge(standin.port)
    try:
        assert request(server.port, "GET", "/v1/models")[0] == 200
    finally:
        assert "open to anyone with the URL" in server.stop()


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer wrong"}, {"x-api-key": "wrong"}])
@pytest.mark.parametrize("path", ["/prebake/status", "/prebake/status.txt"])
def test_the_status_page_refuses_as_the_api_does_and_says_do_not_retry(locked, headers, path):
    """The key check answers every refusal itself, the status page's too: the same 401, which Claude Code and the SDKs
    read as final."""
    status, head, raw = request(locked.port, "GET", path, headers=headers)
    assert status == 401 and head["x-should-retry"] == "false" and head["www-authenticate"] == "Bearer"
    message = json.loads(raw)["error"]["message"]
    assert message.startswith("wrong API key" if headers else "no API key sent") and "VLLM_API_KEY" in message
    status, _, raw = request(locked.port, "GET", path, headers={"x-api-key": KEY})
    assert status == 200 and raw


def test_a_development_endpoint_is_refused_with_the_key_by_the_key_check(standin, locked):
    status, head, raw = request(locked.port, "POST", "/sleep?level=1", b"", {"x-api-key": KEY})
    assert status == 403 and json.loads(raw)["error"]["type"] == "permission_error" and "x-should-retry" not in head
