"""Per-session figures for the status page: how much of each Claude Code turn vLLM's prefix cache served.

Claude Code sends `X-Claude-Code-Session-Id` with every request. For the last MAX_SESSIONS sessions the
bridge counts turns, prompt tokens and the tokens vLLM served from its prefix cache (vLLM's own usage: the
final `message_delta` of a /v1/messages stream, `cache_read_input_tokens`, which vLLM fills from
`prompt_tokens_details.cached_tokens` when started with --enable-prompt-tokens-details, as the launcher
does). A turn that prefilled more than its new part (its prompt tokens less the previous turn's, plus
SLACK_TOKENS for the cache's block rounding) is listed with where its prompt first differs from the previous
turn's (promptdigest.py: hashes of the system prompt, the tools and each message; no text is kept).

Bounded: a few hashes per message of the last turn of each kind of call (main loop, subagent, background
call, told apart by their tools) of each session, TAIL_BYTES of each answer; per request one pass of hashing
over the body as it streams by, and one small JSON parse of the answer's last usage.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from ..claudecode_wire import session_of
from .promptdigest import Prompt, PromptDigest, first_difference
from .streamflag import StreamField

MAX_SESSIONS = 16
MAX_LANES = 4  # kinds of call kept per session
MAX_SLOW = 5  # slow turns listed per session
TAIL_BYTES = 16384  # of each answer, where its usage is
SLACK_TOKENS = 256  # prefilled beyond the new part that is only block rounding (vLLM caches 16-token blocks)


def usage_of(tail: bytes) -> dict | None:
    """The last `usage` object in the end of an answer (an event stream or a JSON body), or None."""
    at = tail.rfind(b'"usage":')
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(tail[at + 8:].decode("utf-8", "replace").lstrip())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def tokens_of(usage: dict) -> tuple[int | None, int | None]:
    """(prompt tokens, of which from the prefix cache): Anthropic's usage counts the uncached input apart."""
    def number(value) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    if "input_tokens" in usage:
        cached = number(usage.get("cache_read_input_tokens"))
        parts = [number(usage.get("input_tokens")), cached, number(usage.get("cache_creation_input_tokens"))]
        prompt = None if parts[0] is None else sum(part or 0 for part in parts)
        return prompt, cached
    details = usage.get("prompt_tokens_details")
    return number(usage.get("prompt_tokens")), number(details.get("cached_tokens")) if isinstance(details, dict) \
        else None


@dataclass
class Lane:
    prompt: Prompt
    tokens: int


@dataclass
class Session:
    id: str
    last_at: float
    turns: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefilled_tokens: int = 0
    slow_turns: int = 0
    slow: deque = field(default_factory=lambda: deque(maxlen=MAX_SLOW))
    lanes: OrderedDict = field(default_factory=OrderedDict)


class Turn:
    """One request of a session while it is relayed: its prompt's digest and the end of its answer."""

    def __init__(self, session: str, body_field: StreamField) -> None:
        self.session = session
        self.digest = PromptDigest(body_field)
        self.tail: deque[bytes] = deque()
        self.kept = 0

    def keep(self, chunk: bytes) -> None:
        self.tail.append(chunk)
        self.kept += len(chunk)
        while self.kept - len(self.tail[0]) >= TAIL_BYTES:
            self.kept -= len(self.tail.popleft())


def describe(prompt: Prompt, index: int, prompt_tokens: int) -> dict:
    """Where a prompt first differs: its part, and about how many tokens into the prompt that part starts."""
    part = prompt.parts[index]
    before = sum(p.size for p in prompt.parts[:index])
    messages = [i for i, p in enumerate(prompt.parts) if p.name == "message"]
    where = {"part": part.name, "about_tokens_in": round(prompt_tokens * before / prompt.size) if prompt.size else 0}
    if part.name == "message":
        where["message"], where["of"] = messages.index(index) + 1, len(messages)
    return where


class SessionBook:
    def __init__(self) -> None:
        self.sessions: OrderedDict[str, Session] = OrderedDict()

    def begin(self, headers: list[tuple[bytes, bytes]], body_field: StreamField | None) -> Turn | None:
        session = session_of(headers)
        if session is None or body_field is None or body_field.cuts is None:
            return None
        return Turn(session, body_field)

    def finish(self, turn: Turn, status: int) -> None:
        """Once the answer has ended: the turn's figures, from vLLM's usage."""
        usage = usage_of(b"".join(turn.tail)) if 200 <= status < 300 else None
        prompt_tokens, cached = tokens_of(usage) if usage else (None, None)
        if prompt_tokens is None:
            return
        session = self.sessions.pop(turn.session, None) or Session(turn.session, time.time())
        self.sessions[turn.session] = session
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        session.last_at = time.time()
        session.turns += 1
        session.prompt_tokens += prompt_tokens
        prompt = turn.digest.prompt()
        lane = prompt.tools()
        previous = session.lanes.pop(lane, None)
        if prompt.complete:
            session.lanes[lane] = Lane(prompt, prompt_tokens)
            while len(session.lanes) > MAX_LANES:
                session.lanes.popitem(last=False)
        if cached is None:
            return
        prefilled = prompt_tokens - cached
        session.cached_tokens += cached
        session.prefilled_tokens += prefilled
        new = max(0, prompt_tokens - previous.tokens) if previous else prompt_tokens
        if previous is None or prefilled <= new + SLACK_TOKENS:
            return
        session.slow_turns += 1
        index = first_difference(previous.prompt, prompt) if prompt.complete else None
        session.slow.append({"turn": session.turns, "prompt_tokens": prompt_tokens, "cached_tokens": cached,
                             "new_tokens": new, "prefilled_tokens": prefilled,
                             "first_difference": None if index is None else describe(prompt, index, prompt_tokens)})

    def snapshot(self) -> list[dict]:
        """The sessions, the most recent first."""
        now = time.time()
        return [{"session": s.id, "last_s_ago": round(now - s.last_at), "turns": s.turns,
                 "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens,
                 "prefilled_tokens": s.prefilled_tokens, "turns_prefilled_beyond_new": s.slow_turns,
                 "slow_turns": list(s.slow)} for s in reversed(self.sessions.values())]


def where_text(where: dict | None) -> str:
    if where is None:
        return "no earlier part differs (the cache had been evicted, or the prompt grew by more than it showed)"
    at = f"about {where['about_tokens_in']:,} tokens in" if where["about_tokens_in"] else "the prompt's start"
    if where["part"] == "message":
        return f"message {where['message']} of {where['of']}, {at}"
    return f"the {'system prompt' if where['part'] == 'system' else 'tools'}, {at}"


def render_lines(sessions: list[dict]) -> list[str]:
    """The sessions for the text page."""
    out = []
    for s in sessions:
        share = f"{100 * s['cached_tokens'] / s['prompt_tokens']:.0f}%" if s["prompt_tokens"] else "-"
        out.append(f"  {s['session']}: {s['turns']} turn(s) {s['last_s_ago']} s ago, {s['prompt_tokens']:,} prompt "
                   f"tokens, {s['cached_tokens']:,} from the prefix cache ({share}), {s['turns_prefilled_beyond_new']} "
                   "turn(s) prefilled beyond their new part")
        out += [f"    turn {t['turn']}: prefilled {t['prefilled_tokens']:,} of {t['prompt_tokens']:,} (new "
                f"{t['new_tokens']:,}); first differs at {where_text(t['first_difference'])}" for t in s["slow_turns"]]
    return out
