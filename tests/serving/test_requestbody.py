"""The one reader of a request body's head (requestbody.read_head): where it stops for each kind of body, and that a
second call reads nothing more."""

from __future__ import annotations

import asyncio
import json

import pytest

from entrypoint.serving.requestbody import PEEK_MAX, Ahead, RequestBody

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
