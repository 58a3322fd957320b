"""A request's prompt as hashes of its parts, made while its body passes through to vLLM (no text kept).

streamflag.StreamField, which reads every generation body already, marks where the top-level members and the
elements of `messages` lie (its cuts); this hashes the bytes of `system`, `tools` and of each message, in
prompt order (the Qwen templates render the system prompt, then the tools, then the messages). Two turns of
one conversation compare part by part: the first part that differs is where the prompt changed, and vLLM's
prefix cache cannot serve anything after it. Bytes are hashed with a lag of CAPTURE, the most a key's start
can lie behind the scanner, so that the parts do not depend on how the body was cut into chunks.

A part of at most NORMALIZE_MAX bytes is hashed without what vLLM's chat template never sees: Claude Code moves
its `cache_control` marks to the newest messages each turn, and a resumed conversation sends a one-block text
content as a plain string. A longer part is hashed as sent, so such a change there counts as a difference.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from .streamflag import CAPTURE, MAX_CUTS, StreamField

PROMPT_MEMBERS = ("system", "tools")  # rendered before the messages, in this order by the Qwen templates
NORMALIZE_MAX = 65536
_CACHE_CONTROL = re.compile(rb',"cache_control":\{[^{}]*\}|"cache_control":\{[^{}]*\},?')
_ONE_TEXT_BLOCK = re.compile(rb'"content":\[\{"type":"text","text":("(?:[^"\\]|\\.)*")\}\]')


def normalized(text: bytes) -> bytes:
    """A part's JSON text without what the chat template does not render (Claude Code writes compact JSON)."""
    return _ONE_TEXT_BLOCK.sub(rb'"content":\1', _CACHE_CONTROL.sub(b"", text))


@dataclass(frozen=True)
class Part:
    name: str  # "tools", "system", or "message"
    digest: bytes  # 8 bytes of BLAKE2b over the part's JSON text
    size: int = field(compare=False)  # bytes of that text, as sent


@dataclass(frozen=True)
class Prompt:
    parts: tuple[Part, ...]  # in prompt order: system, tools, messages
    complete: bool  # False when the body had more parts than MAX_CUTS, or was not a JSON object

    @property
    def size(self) -> int:
        return sum(part.size for part in self.parts)

    def tools(self) -> bytes:
        """What tells one kind of call from another in a session (main loop, subagent, background call)."""
        return next((part.digest for part in self.parts if part.name == "tools"), b"")


def first_difference(previous: Prompt, current: Prompt) -> int | None:
    """The index of the first part of `current` that `previous` does not have at the same place; None: none
    (current is previous, or previous followed by new parts only)."""
    for index, part in enumerate(current.parts):
        if index >= len(previous.parts):
            return None
        if part != previous.parts[index]:
            return index
    return None


class PromptDigest:
    """Fed with each chunk of the body after the field read it; prompt() once the body is whole."""

    def __init__(self, body_field: StreamField) -> None:
        assert body_field.cuts is not None, "the field must record its cuts"
        self.field = body_field
        self.pending = bytearray()  # the body's bytes from `start` on, not hashed yet
        self.start = 0
        self.used = 0  # cuts already applied
        self.hasher = None  # the part being hashed (past NORMALIZE_MAX bytes), with its name and size so far
        self.held: bytearray | None = None  # the part's bytes, while at most NORMALIZE_MAX
        self.name = ""
        self.size = 0
        self.members: dict[str, Part] = {}
        self.messages: list[Part] = []

    def feed(self, chunk: bytes, final: bool = False) -> None:
        self.pending += chunk
        limit = self.start + len(self.pending) - (0 if final else CAPTURE)
        cuts = self.field.cuts
        while self.used < len(cuts) and cuts[self.used][0] <= limit:
            offset, what = cuts[self.used]
            self.used += 1
            self._hash_to(offset)
            self._close()
            if what is True:
                self._open("message")
            elif isinstance(what, str) and what in PROMPT_MEMBERS:
                self._open(what)
        self._hash_to(limit)
        if final:
            self._close()

    def _hash_to(self, offset: int) -> None:
        count = offset - self.start
        if count <= 0:
            return
        if self.held is not None:
            self.held += self.pending[:count]
            self.size += count
            if len(self.held) > NORMALIZE_MAX:  # too long to hold: hashed as sent from here on
                self.hasher = hashlib.blake2b(self.held, digest_size=8)
                self.held = None
        elif self.hasher is not None:
            with memoryview(self.pending) as view:
                self.hasher.update(view[:count])
            self.size += count
        del self.pending[:count]
        self.start = offset

    def _open(self, name: str) -> None:
        self.hasher, self.held, self.name, self.size = None, bytearray(), name, 0

    def _close(self) -> None:
        if self.held is not None:
            digest = hashlib.blake2b(normalized(bytes(self.held)), digest_size=8).digest()
        elif self.hasher is not None:
            digest = self.hasher.digest()
        else:
            return
        part = Part(self.name, digest, self.size)
        if self.name == "message":
            self.messages.append(part)
        else:
            self.members[self.name] = part
        self.hasher = self.held = None

    def prompt(self) -> Prompt:
        self.feed(b"", final=True)
        members = tuple(self.members[name] for name in PROMPT_MEMBERS if name in self.members)
        complete = not self.field.broken and len(self.field.cuts) < MAX_CUTS
        return Prompt(members + tuple(self.messages), complete)
