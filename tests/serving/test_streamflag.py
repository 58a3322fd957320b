"""The bridge reads `stream` the way vLLM's pydantic request models do, without parsing the body whole."""

from __future__ import annotations

import json
import os
import tracemalloc
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
pydantic = pytest.importorskip("pydantic")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from entrypoint.serving.streamflag import StreamField, is_json_content_type  # noqa: E402

SETTINGS = dict(derandomize=not os.environ.get("PREBAKE_FUZZ_RANDOM"), database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


class Request(pydantic.BaseModel):  # the field as vLLM 0.27.1's request models declare it
    stream: bool | None = False


def vllm_streams(body: bytes) -> bool:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    try:
        return bool(Request.model_validate({"stream": data["stream"]}).stream) if "stream" in data else False
    except pydantic.ValidationError:
        return False


def scanned(body: bytes, cuts: list[int] = ()) -> StreamField:
    field = StreamField()
    previous = 0
    for cut in sorted(set(min(c, len(body)) for c in cuts)) + [len(body)]:
        field.feed(body[previous:cut])
        previous = cut
    field.finish()
    return field


def scan(body: bytes, cuts: list[int] = ()) -> bool:
    return scanned(body, cuts).streaming()


def named_model(body: bytes) -> str | None:
    """The model a swap set routes by, as json.loads reads it (the last top-level `model`, a string)."""
    data = json.loads(body)
    return data.get("model") if isinstance(data.get("model"), str) else None


STREAM_VALUES = st.one_of(
    st.booleans(), st.none(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5, -0.0, 1e0]),
    st.sampled_from(["true", "True", "TRUE", "yes", "on", "t", "y", "1", "1.0", " true", "", "off", "no", "f"]),
    st.text(max_size=6), st.lists(st.booleans(), max_size=2), st.dictionaries(st.text(max_size=3), st.booleans(),
                                                                              max_size=2))
JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
JSON = st.recursive(JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=20)


@st.composite
def requests(draw) -> bytes:
    members = draw(st.lists(st.tuples(st.sampled_from(["stream", "model", "messages", "strea", "stream ", "\u0073tream"])
                                      | st.text(max_size=8), st.one_of(STREAM_VALUES, JSON, st.text(max_size=30))),
                            max_size=6))
    text = "{" + ",".join(json.dumps(k, ensure_ascii=draw(st.booleans())) + draw(st.sampled_from([":", " : ", ":\n"]))
                          + json.dumps(v, ensure_ascii=draw(st.booleans())) for k, v in members) + "}"
    if draw(st.booleans()):
        text = text.replace('"stream"', '"\\u0073tream"')
    return draw(st.sampled_from(["", " ", "\n"])) + text


@settings(max_examples=400, **SETTINGS)
@given(requests(), st.lists(st.integers(0, 400), max_size=8))
def test_stream_is_read_as_vllm_validates_it(body, cuts):
    raw = body.encode()
    field = scanned(raw, cuts)
    assert field.streaming() == vllm_streams(raw)
    assert field.model() == named_model(raw)


@settings(max_examples=300, **SETTINGS)
@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=4))
def test_any_bytes_are_read_without_error(body, cuts):
    result = scan(body, cuts)
    if vllm_streams(body):
        assert result  # what vLLM streams is never taken for a non-streaming request


@pytest.mark.parametrize("body, expected", [
    (b'{"stream": true}', True), (b'{"stream": "yes", "stream": false}', False), (b'{"stream": 1.0}', True),
    (b'{"a": {"stream": true}}', False), (b'\xef\xbb\xbf{"stream":true}', True), (b'[{"stream": true}]', False),
    (b'{"messages": "\\"stream\\": true", "stream": "T"}', True), (b'{"stream": [true]}', False),
])
def test_examples(body, expected):
    assert scan(body) == expected == vllm_streams(body)
    assert scan(body, list(range(len(body)))) == expected  # one byte at a time


def test_deep_nesting_and_a_large_body_cost_no_recursion_and_little_memory():
    deep = b'{"x":' + b"[" * 100000 + b"]" * 100000 + b', "stream": true}'
    assert scan(deep) is True  # json.loads raises RecursionError on this
    piece = json.dumps({"role": "user", "content": "word \"quoted\" \\ more " * 50}).encode()
    field = StreamField()
    tracemalloc.start()  # the peak of what the scanner allocates, not the process's lifetime high-water mark
    began = time.monotonic()
    field.feed(b'{"model": "m", "messages": [')
    for _ in range(20000):  # about 50 MB of messages
        field.feed(piece + b",")
    field.feed(piece + b'], "stream": true}')
    field.finish()
    assert field.streaming() is True
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1024 * 1024, f"{peak} bytes at peak for a 50 MB body"
    assert time.monotonic() - began < 30


def test_only_json_bodies_are_read_as_json():
    assert is_json_content_type(None) and is_json_content_type(b"application/json; charset=utf-8")
    assert is_json_content_type(b"application/vnd.api+json")
    assert not is_json_content_type(b"text/plain") and not is_json_content_type(b"multipart/form-data; boundary=x")


ESCAPE_HEAVY = st.text(alphabet=st.sampled_from(['"', "\\", "a", "\n", "é", " "]), max_size=120)


@settings(max_examples=300, **SETTINGS)
@given(ESCAPE_HEAVY, st.sampled_from(["messages", "stream", "model", "x"]), STREAM_VALUES,
       st.lists(st.integers(0, 300), max_size=8))
def test_strings_full_of_quotes_and_backslashes_are_skipped_whatever_the_cuts(text, key, stream, cuts):
    """Escaped quotes and backslash runs, across chunk ends, more of them than string_stop finds one by one
    (ESCAPED_QUOTES_MAX): the string ends where json.loads says it does."""
    raw = json.dumps({key: text * 2, "nested": [{"content": text}], "model": text[:8], "stream": stream},
                     ensure_ascii=False).encode()
    field = scanned(raw, cuts)
    assert field.streaming() == vllm_streams(raw)
    assert field.model() == named_model(raw)


def test_string_stop_on_its_edges():
    from entrypoint.serving.streamflag import ESCAPED_QUOTES_MAX, string_stop
    for data, stop in [(b'abc"x', 3), (b'ab\\"c"', 5), (b'ab\\\\"c', 4), (b"abc\\", 3), (b"ab\\\\", 4), (b"abc", 3),
                       (b'\\"' * (ESCAPED_QUOTES_MAX + 3) + b'x"', 2 * (ESCAPED_QUOTES_MAX + 3) + 1),
                       (b'\\"' * (ESCAPED_QUOTES_MAX + 3) + b"\\", 2 * (ESCAPED_QUOTES_MAX + 3))]:
        assert string_stop(data, 0, len(data)) == stop, data
