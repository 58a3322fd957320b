"""Behind a proxy that cuts silent connections (real nginx, set up as RunPod's), a long prefill is cut
without the bridge and completes with it. The clients are the official SDKs."""

import importlib
import importlib.util

import anthropic
import openai
import pytest

from prebake_testing.clients import anthropic_client, openai_client
from prebake_testing.servers import SLOW_S

SLOW = {"x-standin-delay": str(SLOW_S)}


def chat_stream(server, headers) -> str:
    stream = openai_client(server).chat.completions.create(
        model="ornith", messages=[{"role": "user", "content": "hi"}], stream=True, extra_headers=headers)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def messages_stream(server, headers) -> str:
    with anthropic_client(server).messages.stream(model="ornith", max_tokens=16, extra_headers=headers,
                                                  messages=[{"role": "user", "content": "hi"}]) as stream:
        return "".join(stream.text_stream)


def responses_stream(server, headers) -> str:
    stream = openai_client(server).responses.create(model="ornith", input="hi", stream=True, extra_headers=headers)
    return "".join(event.delta for event in stream if event.type == "response.output_text.delta")


def chat_whole(server, headers) -> str:
    answer = openai_client(server).chat.completions.create(
        model="ornith", messages=[{"role": "user", "content": "hi"}], extra_headers=headers)
    return answer.choices[0].message.content


def messages_whole(server, headers) -> str:
    answer = anthropic_client(server).messages.create(model="ornith", max_tokens=16, extra_headers=headers,
                                                      messages=[{"role": "user", "content": "hi"}])
    return answer.content[0].text


CLIENTS = [chat_stream, messages_stream, responses_stream, chat_whole, messages_whole]
# What each SDK raises when the proxy cuts: a cut stream, or the proxy's 504 before any header.
# A stream cut mid-body reaches the Anthropic SDK's caller as the HTTP library's own error.
CUT = (openai.APIError, anthropic.APIError) + tuple(
    importlib.import_module(name).TransportError for name in ("httpx", "httpx2")
    if importlib.util.find_spec(name))


@pytest.mark.parametrize("call", CLIENTS, ids=lambda c: c.__name__)
def test_without_the_bridge_the_proxy_cuts_a_long_prefill(proxied_vllm, call):
    with pytest.raises(CUT):
        call(proxied_vllm, SLOW)


@pytest.mark.parametrize("call", CLIENTS, ids=lambda c: c.__name__)
def test_through_the_bridge_the_same_request_completes(proxied_bridge, call):
    assert call(proxied_bridge, SLOW) == "tok0 tok1 tok2 tok3 "


def test_a_fast_answer_needs_no_heartbeat_either_way(proxied_vllm, proxied_bridge):
    assert chat_stream(proxied_vllm, {}) == chat_stream(proxied_bridge, {}) == "tok0 tok1 tok2 tok3 "
