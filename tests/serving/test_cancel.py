"""A client that goes away cancels its request upstream: vLLM (here its stand-in) sees the disconnect,
which is what makes vLLM abort the generation and free its KV cache."""

import socket
import time

from prebake_testing.clients import anthropic_client, openai_client

MESSAGES = [{"role": "user", "content": "hi"}]


def assert_cancelled_soon(standin, rid: str, closed_at: float) -> None:
    event = standin.event(rid, timeout=2)
    assert event["event"] == "cancelled", event
    assert event["at"] - closed_at < 1.0


def test_leaving_during_the_heartbeats_cancels_the_prefill(standin, bridge):
    stream = openai_client(bridge).chat.completions.create(
        model="ornith", messages=MESSAGES, stream=True,
        extra_headers={"x-standin-id": "leave-early", "x-standin-delay": "3"})
    # create() returned on the bridge's first heartbeat (status 200); vLLM has sent nothing yet.
    stream.close()
    assert_cancelled_soon(standin, "leave-early", time.monotonic())


def test_leaving_mid_stream_cancels_the_generation(standin, bridge):
    stream = openai_client(bridge).chat.completions.create(
        model="ornith", messages=MESSAGES, stream=True,
        extra_headers={"x-standin-id": "leave-mid", "x-standin-chunks": "50", "x-standin-gap": "0.1"})
    for number, _ in enumerate(stream):
        if number == 3:
            break
    stream.close()
    assert_cancelled_soon(standin, "leave-mid", time.monotonic())


def test_leaving_an_anthropic_stream_cancels_it(standin, bridge):
    headers = {"x-standin-id": "leave-anthropic", "x-standin-delay": "1", "x-standin-chunks": "50",
               "x-standin-gap": "0.1"}
    with anthropic_client(bridge).messages.stream(model="ornith", max_tokens=16, messages=MESSAGES,
                                                  extra_headers=headers) as stream:
        next(iter(stream.text_stream))
    assert_cancelled_soon(standin, "leave-anthropic", time.monotonic())


def test_leaving_a_non_streaming_request_cancels_it(standin, bridge):
    # A raw socket: send the request, read nothing, hang up.
    body = b'{"model":"ornith","messages":[{"role":"user","content":"hi"}]}'
    with socket.create_connection(("127.0.0.1", bridge.port)) as client:
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                       b"x-standin-id: leave-whole\r\nx-standin-delay: 3\r\n"
                       b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        standin.wait_held("leave-whole")  # relayed: vLLM has it
    assert_cancelled_soon(standin, "leave-whole", time.monotonic())
