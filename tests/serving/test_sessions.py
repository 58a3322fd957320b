"""Per-session prefix-cache figures (entrypoint/serving/sessions.py): the prompt's parts hashed as the body passes,
vLLM's usage from the end of its answer, and the status page's list, through the real bridge and the stand-in
vLLM that reports cached tokens as vLLM does (STANDIN_PREFIX_CACHE)."""

from __future__ import annotations

import json
import os
import subprocess
import tracemalloc

import pytest

from entrypoint.claudecode import settings
from entrypoint.serving.promptdigest import PromptDigest, first_difference
from entrypoint.serving.sessions import SessionBook, Turn, tokens_of, usage_of
from entrypoint.serving.streamflag import StreamField
from prebake_testing import claudecli
from prebake_testing.net import get, request
from prebake_testing.servers import StandIn, start_bridge

KEY = "sk-pod-sessions-1c9d"
TOOLS = [{"name": "Bash", "description": "Runs a command.", "input_schema": {"type": "object"}}]


def body(messages: list, system: str = "You are Claude Code.", tools: list = TOOLS) -> bytes:
    """Claude Code's member order and compact JSON."""
    return json.dumps({"model": "ornith", "messages": messages, "system": [{"type": "text", "text": system}],
                       "tools": tools, "max_tokens": 20000, "stream": True}, separators=(",", ":")).encode()


def digest(raw: bytes, size: int):
    field = StreamField(cuts=True)
    hashed = PromptDigest(field)
    for at in range(0, len(raw), size):
        field.feed(raw[at:at + size])
        hashed.feed(raw[at:at + size])
    field.finish()
    return hashed.prompt()


def user(text: str, **extra) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text, **extra}]}


TURN1 = [user("List the files."), {"role": "assistant", "content": [{"type": "text", "text": "setup.py"}]}]


@pytest.mark.parametrize("size", [1, 7, 1000, 1 << 20])
def test_the_parts_do_not_depend_on_how_the_body_arrives(size):
    whole = digest(body(TURN1), 1 << 20)
    assert [part.name for part in whole.parts] == ["system", "tools", "message", "message"] and whole.complete
    assert digest(body(TURN1), size) == whole


def test_the_first_difference_is_the_first_changed_part():
    first = digest(body(TURN1), 64)
    grown = digest(body([*TURN1, user("Read it.")]), 64)
    assert first_difference(first, grown) is None  # the previous prompt and new messages only
    edited = digest(body([user("List the files!"), *TURN1[1:], user("Read it.")]), 64)
    assert first_difference(first, edited) == 2  # after system and tools: the first message
    assert first_difference(first, digest(body(TURN1, system="Another prompt."), 64)) == 0


def test_what_the_template_never_renders_is_no_difference():
    """Claude Code moves cache_control to its newest messages, and a resumed conversation sends a one-block text
    content as a string: vLLM renders both the same, so the prefix cache serves them."""
    marked = digest(body([user("List the files.", cache_control={"type": "ephemeral"}), TURN1[1]]), 64)
    plain = digest(body([{"role": "user", "content": "List the files."}, TURN1[1]]), 64)
    assert first_difference(marked, plain) is None and first_difference(digest(body(TURN1), 64), plain) is None


def test_vllms_final_usage_is_read_from_the_end_of_the_answer():
    # vLLM 0.27.1's message_delta (anthropic/serving.py _build_anthropic_usage; cache fields with
    # --enable-prompt-tokens-details), after its text deltas; a text that quotes "usage" does not fool it
    tail = (b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta",'
            b'"text":"\\"usage\\":{}"},"index":0}\n\nevent: message_delta\ndata: {"type":"message_delta",'
            b'"delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":112,"output_tokens":9,'
            b'"cache_read_input_tokens":4096}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert tokens_of(usage_of(tail)) == (4208, 4096)
    assert tokens_of({"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}) == (50, 32)
    assert tokens_of({"input_tokens": 50, "output_tokens": 1}) == (50, None)  # no details: cached unknown


def test_memory_is_bounded_over_many_sessions():
    book = SessionBook()
    raw = body([user("x" * 500) for _ in range(100)])
    tracemalloc.start()
    for number in range(60):
        field = StreamField(cuts=True)
        turn = Turn(f"session-{number}", field)
        field.feed(raw)
        turn.digest.feed(raw)
        turn.keep(b"x" * 100_000 + b'"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":0}')
        book.finish(turn, 200)
        if number == 20:
            settled = tracemalloc.get_traced_memory()[0]
    grown = tracemalloc.get_traced_memory()[0] - settled
    tracemalloc.stop()
    assert len(book.snapshot()) == 16 and grown < 200_000, grown


@pytest.fixture
def pod():
    vllm = StandIn(env={"STANDIN_PREFIX_CACHE": "1"})
    bridge = start_bridge(vllm.port, key=KEY)
    yield vllm, bridge
    bridge.stop()
    vllm.stop()


def turn(bridge, session: str, messages: list) -> None:
    status, _, raw = request(bridge.port, "POST", "/v1/messages", body(messages), headers={
        "authorization": f"Bearer {KEY}", "content-type": "application/json", "x-claude-code-session-id": session})
    assert status == 200 and b"message_stop" in raw, raw


def sessions(bridge) -> list[dict]:
    return get(bridge.port, "/prebake/status", {"authorization": f"Bearer {KEY}"})[2]["sessions"]


def test_the_status_page_lists_each_session_and_where_a_slow_turn_changed(pod):
    _, bridge = pod
    history = [user("word " * 4000)]
    for _ in range(3):  # each turn: the previous prompt and the answer, plus a new request
        turn(bridge, "s-one", history)
        history = history + [{"role": "assistant", "content": [{"type": "text", "text": "done"}]}, user("next")]
    history[0] = user("Word " * 4000)  # the first message edited: nothing after the tools and system is cached
    turn(bridge, "s-one", history)
    turn(bridge, "s-two", [user("hello")])
    two, one = sessions(bridge)
    assert (two["session"], two["turns"], one["session"], one["turns"]) == ("s-two", 1, "s-one", 4)
    assert one["cached_tokens"] > 10_000 and one["turns_prefilled_beyond_new"] == 1
    [slow] = one["slow_turns"]
    assert slow["turn"] == 4 and slow["prefilled_tokens"] > 5000 and slow["new_tokens"] < 100
    assert slow["first_difference"]["part"] == "message" and slow["first_difference"]["message"] == 1
    text = request(bridge.port, "GET", "/prebake/status.txt", headers={"authorization": f"Bearer {KEY}"})[2].decode()
    assert "s-one: 4 turn(s)" in text and "first differs at message 1 of 7" in text
    assert "sessions" not in get(bridge.port, "/prebake/status")[2]  # without the key: not shown


def test_a_session_id_shaped_like_a_secret_is_redacted(pod):
    _, bridge = pod
    secret = "sk-ant-api03-0123456789abcdef0123456789"
    turn(bridge, secret, [user("hello")])
    page = request(bridge.port, "GET", "/prebake/status", headers={"authorization": f"Bearer {KEY}"})[2].decode()
    assert secret not in page and sessions(bridge)[0]["turns"] == 1


@pytest.mark.parametrize("version", claudecli.versions())
def test_a_real_claude_code_session_and_its_continue(pod, tmp_path, version):
    """`claude -p` then `claude -p --continue`: one session id, two turns, the second served from the cache."""
    cli = claudecli.binary(version)
    if cli is None:
        pytest.skip(claudecli.install_hint(version))
    _, bridge = pod
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update({"HOME": str(tmp_path), "ANTHROPIC_BASE_URL": bridge.url, "ANTHROPIC_AUTH_TOKEN": KEY,
                "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                **dict(settings("ornith", 524288))})
    for args in (["say hi"], ["--continue", "again"]):
        done = subprocess.run([cli, "-p", *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "tok0" in done.stdout, done.stdout + done.stderr
    [session] = sessions(bridge)
    assert session["turns"] >= 2 and session["cached_tokens"] > 0 and session["turns_prefilled_beyond_new"] == 0, \
        session
