"""What the official SDKs receive through the bridge: vLLM's bytes unchanged after the heartbeats, the
heartbeats in a form each SDK skips, and vLLM's late errors as API errors that carry its message."""

import json

import anthropic
import openai
import pytest

from prebake_testing.servers import SLOW_S
from prebake_testing.net import request
from prebake_testing.standin import CONTEXT_ERROR
from prebake_testing.clients import anthropic_client, openai_client

STREAMS = {  # path -> (request body, heartbeat the API's SDK skips)
    "/v1/chat/completions": ({"model": "ornith", "messages": [{"role": "user", "content": "hi"}], "stream": True},
                             b": keep-alive\n\n"),
    "/v1/completions": ({"model": "ornith", "prompt": "hi", "stream": True}, b": keep-alive\n\n"),
    "/v1/responses": ({"model": "ornith", "input": "hi", "stream": True}, b": keep-alive\n\n"),
    "/v1/messages": ({"model": "ornith", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}],
                      "stream": True}, b'event: ping\ndata: {"type":"ping"}\n\n'),
}


def strip_heartbeats(raw: bytes, beat: bytes) -> tuple[bytes, int]:
    count = 0
    while beat in raw:  # anywhere, but only whole heartbeats at event boundaries
        before, _, after = raw.partition(beat)
        assert before == b"" or before.endswith(b"\n\n"), raw
        raw, count = before + after, count + 1
    return raw, count


@pytest.mark.parametrize("path", STREAMS)
def test_stream_bytes_are_vllms_once_the_heartbeats_are_removed(standin, bridge, path):
    body, beat = STREAMS[path]
    rid = "bytes" + path.replace("/", "-")
    status, headers, raw = request(bridge.port, "POST", path, body,
                                   {"x-standin-id": rid, "x-standin-delay": "1.6", "x-standin-chunks": "40"})
    assert status == 200 and headers["content-type"] == "text/event-stream; charset=utf-8"
    relayed, beats = strip_heartbeats(raw, beat)
    assert relayed == standin.event(rid)["body"].encode()
    assert beats >= 2  # 1.6 s of silence at 0.5 s per heartbeat
    if path != "/v1/responses":  # vLLM's Responses stream starts before the prefill: its beats come after
        assert raw.startswith(beat * beats)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/completions", "/v1/responses"])
def test_non_streaming_answer_is_whitespace_then_vllms_json(standin, bridge, path):
    body = dict(STREAMS[path][0], stream=False)
    rid = "whole" + path.replace("/", "-")
    status, headers, raw = request(bridge.port, "POST", path, body, {"x-standin-id": rid, "x-standin-delay": "1.2"})
    assert status == 200 and headers["content-type"] == "application/json"
    assert raw.lstrip(b"\n") == standin.event(rid)["body"].encode()
    assert raw.startswith(b"\n\n")  # two heartbeats in 1.2 s
    json.loads(raw)  # whitespace ahead of JSON is still JSON


def test_fast_answers_pass_with_vllms_status_and_headers(standin, bridge):
    status, headers, raw = request(bridge.port, "POST", "/v1/chat/completions",
                                   dict(STREAMS["/v1/chat/completions"][0], stream=False), {"x-standin-id": "fast"})
    assert status == 200 and headers["content-length"] == str(len(raw)) and headers["server"] == "uvicorn"
    assert raw == standin.event("fast")["body"].encode()


def test_sdks_parse_what_the_bridge_relays(bridge):
    slow = {"x-standin-delay": "1.2"}
    openai_sdk, anthropic_sdk = openai_client(bridge), anthropic_client(bridge)
    chat = openai_sdk.chat.completions.create(model="ornith", messages=[{"role": "user", "content": "hi"}],
                                              stream=True, extra_headers=slow)
    assert "".join(c.choices[0].delta.content or "" for c in chat if c.choices) == "tok0 tok1 tok2 tok3 "
    completion = openai_sdk.completions.create(model="ornith", prompt="hi", stream=True, extra_headers=slow)
    assert "".join(c.choices[0].text for c in completion) == "tok0 tok1 tok2 tok3 "
    whole = openai_sdk.completions.create(model="ornith", prompt="hi", extra_headers=slow)
    assert whole.choices[0].text == "tok0 tok1 tok2 tok3 "
    with anthropic_sdk.messages.stream(model="ornith", max_tokens=16, messages=[{"role": "user", "content": "hi"}],
                                       extra_headers=slow) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "tok0 tok1 tok2 tok3 " and final.stop_reason == "end_turn"
    response = openai_sdk.responses.create(model="ornith", input="hi", extra_headers=slow)
    assert response.output_text == "tok0 tok1 tok2 tok3 "


LATE_400 = {"x-standin-delay": "1.2", "x-standin-error": "400"}


def test_openai_chat_error_after_heartbeats_raises_with_vllms_message(bridge):
    stream = openai_client(bridge).chat.completions.create(
        model="ornith", messages=[{"role": "user", "content": "hi"}], stream=True, extra_headers=LATE_400)
    with pytest.raises(openai.APIError) as error:
        list(stream)
    assert error.value.message == CONTEXT_ERROR
    assert error.value.body == {"message": CONTEXT_ERROR, "type": "BadRequestError", "param": "input_tokens",
                                "code": 400}


def test_openai_completions_error_after_heartbeats_raises_with_vllms_message(bridge):
    stream = openai_client(bridge).completions.create(model="ornith", prompt="hi", stream=True,
                                                      extra_headers=LATE_400)
    with pytest.raises(openai.APIError, match="maximum context length is 1024 tokens"):
        list(stream)


def test_openai_responses_error_after_heartbeats_raises_with_vllms_message(bridge):
    stream = openai_client(bridge).responses.create(model="ornith", input="hi", stream=True, extra_headers=LATE_400)
    with pytest.raises(openai.APIError) as error:
        list(stream)
    assert error.value.message == CONTEXT_ERROR


def test_anthropic_error_after_heartbeats_raises_with_vllms_message(bridge):
    with pytest.raises(anthropic.APIStatusError) as error:
        with anthropic_client(bridge).messages.stream(model="ornith", max_tokens=16, extra_headers=LATE_400,
                                                      messages=[{"role": "user", "content": "hi"}]) as stream:
            list(stream.text_stream)
    assert error.value.body == {"type": "error", "error": {"type": "BadRequestError", "message": CONTEXT_ERROR}}
    assert CONTEXT_ERROR in str(error.value)


def test_an_error_before_the_first_heartbeat_keeps_vllms_status(bridge):
    fast_400 = {"x-standin-error": "400"}
    with pytest.raises(openai.BadRequestError) as error:
        openai_client(bridge).chat.completions.create(model="ornith", messages=[{"role": "user", "content": "hi"}],
                                                      stream=True, extra_headers=fast_400)
    assert error.value.status_code == 400 and CONTEXT_ERROR in error.value.message
    with pytest.raises(anthropic.BadRequestError) as error:
        anthropic_client(bridge).messages.create(model="ornith", max_tokens=16, stream=True, extra_headers=fast_400,
                                                 messages=[{"role": "user", "content": "hi"}])
    assert error.value.body["error"]["message"] == CONTEXT_ERROR


def test_a_non_streaming_error_after_the_whitespace_is_vllms_json_with_status_200(standin, bridge):
    # The trade-off docs/bridge.md states: the status went out as 200 with the first whitespace.
    status, _, raw = request(bridge.port, "POST", "/v1/chat/completions",
                             dict(STREAMS["/v1/chat/completions"][0], stream=False), LATE_400)
    assert status == 200
    assert json.loads(raw) == {"error": {"message": CONTEXT_ERROR, "type": "BadRequestError",
                                         "param": "input_tokens", "code": 400}}


def test_heartbeat_interval_is_the_knobs_value(standin, bridge):
    _, _, raw = request(bridge.port, "POST", "/v1/chat/completions", STREAMS["/v1/chat/completions"][0],
                        {"x-standin-delay": str(SLOW_S / 2)})
    beats = raw.count(b": keep-alive\n\n")
    assert 3 <= beats <= 4  # 2 s of silence at one heartbeat per 0.5 s
