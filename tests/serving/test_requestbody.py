"""The one reader of a request body's head (requestbody.read_head): where it stops for each kind of body, and that a
second call reads nothing more."""

from __future__ import annotations

import asyncio
import json

import pytest

from entrypoint.serving.requestbody import PEEK_MAX, Ahead, BodyAmbiguous, RequestBody

PROMPT = [{"role": "user", "content": "x" * (PEEK_MAX + (1 << 18))}]  # past PEEK_MAX on its own


def head_read(body: bytes, ahead: Ahead = Ahead.MEMBERS, content_type: bytes = b"application/json",
              size: int = 1 << 16) -> tuple[int, int, RequestBody]:
    """The bytes read_head read of `body` sent in chunks of `size`, the bytes a second call added, the body."""
    async def run():
        parts = [body[i:i + size] for i in range(0, len(body), size)]
        messages = [{"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
                    for i, part in enumerate(parts)]

        async def receive():
            return messages.pop(0)
        held = RequestBody(receive, [(b"content-length", str(len(body)).encode()), (b"content-type", content_type)],
                           scan=True, ahead=ahead)
        await held.read_head()
        first = held.size
        await held.read_head()
        return first, held.size - first, held
    return asyncio.run(run())


def encoded(**members) -> bytes:
    return json.dumps(members).encode()


def test_it_stops_once_model_and_stream_are_both_seen():
    read, again, held = head_read(encoded(model="claude-opus-4-8", stream=True, messages=PROMPT, tail=1))
    assert read <= 1 << 16 and again == 0 and held.streaming and held.field.model() == "claude-opus-4-8"


def test_a_body_smaller_than_the_bound_without_stream_is_read_whole():
    read, again, held = head_read(encoded(model="m", messages=[{"role": "user", "content": "hi"}]))
    assert held.done.is_set() and again == 0 and not held.streaming


def test_stream_past_the_bound_is_given_up_at_it():
    body = encoded(model="claude-opus-4-8", messages=PROMPT, stream=True)
    read, again, held = head_read(body)
    assert PEEK_MAX <= read < PEEK_MAX + (1 << 16) and again == 0 and not held.done.is_set()
    assert held.field.model() == "claude-opus-4-8"


@pytest.mark.parametrize("ahead", [Ahead.MEMBERS, Ahead.MODEL])
def test_a_model_past_the_bound_is_read_for_only_when_a_swap_needs_it(ahead):
    body = encoded(messages=PROMPT, stream=True, model="qwen38", tail="x" * (1 << 17))
    read, again, held = head_read(body, ahead)
    model_needed = ahead is Ahead.MODEL
    assert again == 0 and (held.field.model() == "qwen38") == model_needed
    assert read < PEEK_MAX + (1 << 16) if not model_needed else PEEK_MAX < read < len(body)


@pytest.mark.parametrize("body, content_type", [
    (encoded(model="m", stream=True), b"text/plain"),  # FastAPI would not parse it: nothing to read in it
    (b"[" + b"1," * PEEK_MAX + b"1]", b"application/json"),  # not a JSON object: vLLM's 4xx, nothing to learn
])
def test_a_body_that_is_not_a_json_object_is_not_read_ahead(body, content_type):
    read, again, _ = head_read(body, content_type=content_type)
    assert read <= 1 << 16 and again == 0


def test_a_utf16_body_is_read_until_its_members_and_goes_chunked():
    body = json.dumps({"model": "m", "stream": True, "messages": PROMPT}).encode("utf-16")
    read, _, held = head_read(body)
    assert read <= 1 << 16 and held.streaming and held.upstream_content_length() is None


@pytest.mark.parametrize("encoding, size", [("utf-8", 4), ("utf-16", 4), ("utf-32-le", 2)])
def test_with_nothing_to_rename_only_the_encoding_is_read_ahead(encoding, size):
    """A bridge with no names to rename, no swap and vLLM up needs only the framing: json.detect_encoding's 4 bytes."""
    body = json.dumps({"model": "m", "messages": PROMPT, "stream": True}).encode(encoding)
    read, again, held = head_read(body, Ahead.ENCODING, size=size)
    assert 4 <= read <= 4 + size and again == 0
    assert (held.upstream_content_length() is None) == (encoding != "utf-8")


# --- hostile round 6 (issue 56): a held request's `stream` however far, in bounded memory ------------------------

def test_a_held_requests_stream_is_read_however_far_and_the_rest_waits_on_disk():
    """While the start holds a request, its `stream` is read wherever it stands; what is read past PEEK_MAX waits in
    a temporary file, not in memory, and every byte goes to vLLM in order."""
    body = encoded(model="claude-opus-4-8", messages=[{"role": "user", "content": "y" * (5 << 20)}], stream=True)

    async def run():
        parts = [body[i:i + (1 << 16)] for i in range(0, len(body), 1 << 16)]
        messages = [{"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
                    for i, part in enumerate(parts)]

        async def receive():
            return messages.pop(0)
        held = RequestBody(receive, [(b"content-length", str(len(body)).encode())], scan=True)
        held.stream_however_far = True
        await held.read_head()
        in_memory = sum(map(len, held.held))
        sent = b"".join([chunk async for chunk in held.chunks()])
        return held, in_memory, sent
    held, in_memory, sent = asyncio.run(run())
    assert held.done.is_set() and held.streaming
    assert in_memory <= PEEK_MAX and held.spill is None  # read back and closed
    assert sent == body


@pytest.mark.parametrize("body, member", [
    (b'{"model": "a", "stream": true, "model": "b"}', "model"),
    (b'{"stream": true, "messages": [{"stream": false}], "stream": false}', "stream"),
    (b'{"stream": false, "m\\u006fdel": "a", "model": "a"}', "model"),  # an escaped key is the same key
])
def test_a_body_that_gives_model_or_stream_twice_is_refused(body, member):
    """Wherever the second one comes: read ahead, or as the body goes on to vLLM (the chunk that holds it never goes)."""
    async def relayed() -> bytes:
        messages = [{"type": "http.request", "body": body[i:i + 3], "more_body": i + 3 < len(body)}
                    for i in range(0, len(body), 3)]

        async def receive():
            return messages.pop(0)
        held = RequestBody(receive, [(b"content-length", str(len(body)).encode())], scan=True)
        await held.read_head()
        return b"".join([chunk async for chunk in held.chunks()])
    with pytest.raises(BodyAmbiguous, match=f'"{member}" more than once'):
        asyncio.run(relayed())


def test_a_key_given_twice_inside_a_value_is_not_a_duplicate():
    read, again, held = head_read(b'{"model": "a", "messages": [{"model": "b", "stream": 1}], "stream": true}')
    assert held.field.model() == "a" and held.streaming
