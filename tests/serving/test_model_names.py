"""Claude Code's own model names reach the pod's model: any `claude-*` name vLLM does not serve is renamed by
the bridge to the pod's model (only the bytes of `model` change), every other name goes to vLLM as sent, and
the pod's names stay what /v1/models lists. The stand-in checks names as vLLM does (STANDIN_STRICT_NAMES=1)."""

import json
import socket

import pytest

from prebake_testing.servers import StandIn, start_bridge
from prebake_testing.net import get, request, wait_until

SERVED = ["ornith", "claude-ornith", "claude-ornith[1m]", "claude-opus-5"]


@pytest.fixture(scope="module")
def strict():
    server = StandIn(args=["--served-model-name", *SERVED], env={"STANDIN_STRICT_NAMES": "1"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def named(strict):
    server = start_bridge(strict.port, extra=["--served-names", json.dumps(SERVED)])
    yield server
    server.stop()


def messages(model: str, **extra) -> dict:
    return {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize("sent, received", [
    ("claude-opus-4-8", "ornith"),  # Claude Code 2.1.197's default
    ("claude-haiku-4-5-20251001", "ornith"),  # --model haiku, dated
    ("claude-sonnet-9[1m]", "ornith"),  # a future name, with the suffix other clients keep
    ("claude-ornith", "claude-ornith"),  # the pod's own names are sent as they are
    ("claude-opus-5", "claude-opus-5"),  # a VL_ALIASES name
    ("ornith", "ornith"),
])
def test_claude_names_reach_the_pods_model(strict, named, sent, received):
    rid = f"name-{sent}"
    status, _, raw = request(named.port, "POST", "/v1/messages", messages(sent), {"x-standin-id": rid})
    assert status == 200, raw
    assert strict.event(rid)["model"] == received


def test_only_the_model_bytes_change_and_the_length_follows(strict, named):
    """A body whose `model` is not first, streamed, with a model value that escapes: the rest is vLLM's to read."""
    raw = (b'{"max_tokens":16,"messages":[{"role":"user","content":"\\"model\\": \\"claude-x\\""}],'
           b'"model":"claude-\\u006fpus-4-8","stream":true}')
    status, _, answer = request(named.port, "POST", "/v1/messages", raw, {"x-standin-id": "late"})
    assert status == 200 and b"message_stop" in answer
    assert strict.event("late")["model"] == "ornith"
    echoed = request(named.port, "POST", "/_standin/echo", raw)
    assert echoed[0] == 200  # not a generation path: nothing read ahead, nothing renamed


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"model": "claude-opus-4-8", "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/completions", {"model": "claude-opus-4-8", "prompt": "hi"}),
    ("/v1/responses", {"model": "claude-opus-4-8", "input": "hi"}),
])
def test_every_generation_api_gets_the_rename(strict, named, path, body):
    rid = "api" + path.replace("/", "-")
    assert request(named.port, "POST", path, body, {"x-standin-id": rid})[0] == 200
    assert strict.event(rid)["model"] == "ornith"


def test_count_tokens_gets_the_rename_too(named):
    """vLLM checks `model` on /v1/messages/count_tokens as on generation requests."""
    assert request(named.port, "POST", "/v1/messages/count_tokens", messages("claude-opus-4-8"))[0] == 200
    assert request(named.port, "POST", "/v1/messages/count_tokens", messages("gpt-4o"))[0] == 404


@pytest.mark.parametrize("name", ["gpt-4o", "Claude-opus-4-8", "opus", "deepseek-v9"])
def test_other_names_keep_vllms_404(named, name):
    status, _, raw = request(named.port, "POST", "/v1/messages", messages(name))
    assert status == 404 and f"The model `{name}` does not exist." in raw.decode()


def test_models_list_is_the_pods(named):
    status, _, listing = get(named.port, "/v1/models")
    assert status == 200 and [model["id"] for model in listing["data"]] == ["ornith"]


def test_without_served_names_nothing_is_renamed(strict):
    """A bridge started without --served-names (an older launcher) relays the name as sent: vLLM's 404."""
    server = start_bridge(strict.port)
    try:
        status, _, _ = request(server.port, "POST", "/v1/messages", messages("claude-opus-4-8"))
        assert status == 404
    finally:
        server.stop()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_a_utf16_or_utf32_body_is_renamed_as_fastapi_would_parse_it(strict, named, encoding):
    """FastAPI reads a body with json.loads of its bytes, which detects UTF-16 and UTF-32 (json.detect_encoding,
    with or without a byte order mark): vLLM would read this one, so the bridge sends it on as UTF-8 and renames
    its model. The stand-in parses bodies the same way."""
    rid = f"wide-{encoding}"
    body = json.dumps(messages("claude-opus-4-8", stream=True), ensure_ascii=False).replace("hi", "h\u00ef \U0001f600")
    status, _, raw = request(named.port, "POST", "/v1/messages", body.encode(encoding), {"x-standin-id": rid})
    assert status == 200 and b"message_stop" in raw, raw[:300]  # `stream` read too: an SSE answer
    assert strict.event(rid)["model"] == "ornith"


def test_a_utf16_body_that_does_not_decode_gets_a_400_in_the_apis_format(named):
    body = json.dumps(messages("claude-opus-4-8")).encode("utf-16-le") + b"\x00"  # an odd byte count
    status, _, raw = request(named.port, "POST", "/v1/messages", body)
    assert status == 400 and "send it as UTF-8" in json.loads(raw)["error"]["message"], raw


def test_a_body_whose_stream_comes_past_a_mib_streams_on_before_it_is_whole(strict, named):
    """The bridge reads a body's head until `model` and `stream` (requestbody.read_head), at most 1 MiB: a body whose
    `stream` comes after 1.5 MiB of messages reaches vLLM, renamed, while its last bytes are still to come, and its
    answer streams."""
    import socket

    from prebake_testing.net import wait_until

    head = json.dumps(messages("claude-opus-4-8", messages=[{"role": "user", "content": "x" * (3 << 19)}]))[:-1]
    tail = b', "stream": true}'
    body = head.encode() + tail
    with socket.create_connection(("127.0.0.1", named.port)) as conn:
        conn.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-standin-id: "
                     b"late-stream\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % len(body) + head.encode())

        def reached() -> bool:
            active = get(strict.port, "/_standin/active")[2]
            return any(item["id"] == "late-stream" and item["body_bytes"] >= 1 << 20 for item in active)
        wait_until(reached, 10, "vLLM holding more than 1 MiB of the body before its end was sent")
        conn.sendall(tail)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and b"text/event-stream" in answer and b"event: message_stop" in answer
    assert strict.event("late-stream")["model"] == "ornith"


# --- hostile round 6 (issue 56): a body that names its model twice ----------------------------------------------

@pytest.mark.parametrize("first, second", [("claude-x", "claude-x"), ("claude-opus-4-8", "ornith")])
def test_a_body_that_gives_model_twice_is_refused_before_vllm_reads_it(strict, first, second):
    """vLLM (json.loads) reads the last `model`, the bridge renamed the first: the second key in a later TCP segment,
    after the bridge began to relay, used to reach vLLM as a 404 (or as another model than the one renamed to).
    The bridge answers 400 in the API's format, and vLLM never gets the whole body (it never answers it)."""
    rid = f"twice-{first}-{second}"
    head = b'{"model": "%s", "stream": false, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]' \
        % first.encode()
    tail = b', "model": "%s"}' % second.encode()
    # heartbeats far off: the refusal comes before any byte of the answer, whatever this machine's load
    named = start_bridge(strict.port, heartbeat=60, extra=["--served-names", json.dumps(SERVED)])
    try:
        answer = send_in_two(named.port, rid, head, tail, strict)
    finally:
        named.stop()
    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert error["type"] == "error" and '"model" more than once' in error["error"]["message"], error
    wait_until(lambda: not any(item["id"] == rid for item in get(strict.port, "/_standin/active")[2]), 10,
               "vLLM's request closed")
    assert not [e for e in strict.events() if e.get("id") == rid and e["event"] in ("done", "not found")]


def send_in_two(port: int, rid: str, head: bytes, tail: bytes, strict: StandIn) -> bytes:
    """A request whose body's tail is sent once vLLM holds its head; the raw answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-standin-id: "
                     + rid.encode() + b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % (len(head) + len(tail))
                     + head)
        wait_until(lambda: any(item["id"] == rid for item in get(strict.port, "/_standin/active")[2]), 10,
                   "the body's head relayed to vLLM")
        conn.sendall(tail)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_body_that_gives_model_twice_in_one_piece_is_refused_too(named):
    raw = b'{"model": "claude-x", "max_tokens": 16, "messages": [], "model": "claude-x"}'
    status, _, answer = request(named.port, "POST", "/v1/messages", raw)
    assert status == 400 and '"model" more than once' in json.loads(answer)["error"]["message"], answer
