"""Whether vLLM will stream its answer to a request, read from the body as it passes through to vLLM.

vLLM's request models (ChatCompletionRequest, CompletionRequest, ResponsesRequest, AnthropicMessagesRequest
in 0.27.1) declare `stream: bool | None = False`, validated by pydantic in lax mode after FastAPI's
json.loads of the body. So vLLM streams when the top-level "stream" member (the last one, if repeated)
is true, 1, 1.0, or a string that lower-cases to 1, on, t, true, y or yes; anything else is not
streaming or a 4xx. FastAPI parses the body as JSON only without a content-type or with
application/json or application/*+json.

The scanner follows the body chunk by chunk without building it: its state is a depth counter and at
most CAPTURE bytes of one key or value, so a 200 MB prompt or a deeply nested document costs no memory
and no recursion. Regular expressions skip strings and nested values in C.
"""

from __future__ import annotations

import email.message
import json
import re

CAPTURE = 1024  # longer keys or values cannot be "stream" or a value pydantic reads as true
TRUE_STRINGS = frozenset({"1", "on", "t", "true", "y", "yes"})
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_STRUCTURE = re.compile(rb'["{}\[\]]')
_LITERAL = re.compile(rb'[^,}\]\s"{\[]*')
_WHITESPACE = b" \t\r\n"
WATCHED = frozenset({"stream", "model"})  # `model`: which model of a swap set a request names
SEGMENTED = "messages"  # with cuts: where each element of this top-level array starts and ends
MAX_CUTS = 8192
ESCAPED_QUOTES_MAX = 32  # per string and chunk, before string_stop leaves the rest to the regular expression
BOM = b"\xef\xbb\xbf"


def string_stop(data: bytes, pos: int, end: int) -> int:
    """Where a JSON string that goes on at `pos` (not inside an escape) stops in this chunk: its closing quote, a
    backslash that is the chunk's last byte (its pair comes in the next chunk), or the chunk's end. Quotes are found
    with bytes.find (memchr: a 400 KB prompt in well under a millisecond, where the regular expression takes
    milliseconds); a quote is escaped when an odd run of backslashes stands before it. Text with many escaped
    quotes goes on with the regular expression, which costs the same whatever the escapes."""
    for _ in range(ESCAPED_QUOTES_MAX):
        quote = data.find(b'"', pos, end)
        stop = end if quote < 0 else quote
        run = stop
        while run > pos and data[run - 1] == 0x5C:
            run -= 1
        if (stop - run) % 2 == 0:
            return stop  # an unescaped quote, or a chunk that ends outside an escape
        if quote < 0:
            return end - 1  # the chunk ends with a backslash whose pair has not arrived
        pos = quote + 1  # an escaped quote: part of the string
    return _STRING_REST.match(data, pos).end()


def is_json_content_type(value: bytes | None) -> bool:
    if not value:
        return True
    message = email.message.Message()
    message["content-type"] = value.decode("latin-1")
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def streams(value: object) -> bool:
    """pydantic's lax bool, for the values it reads as True."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value == 1
    if isinstance(value, float):
        return value == 1.0
    return isinstance(value, str) and value.lower() in TRUE_STRINGS


class StreamField:
    """The top-level `stream` and `model` members of a JSON body, followed chunk by chunk. With `cuts`, it also
    lists where the body's parts lie (promptdigest.py hashes them): (offset, key) where a top-level member's
    key starts, (offset, True) where an element of `messages` starts and (offset, False) right after it ends,
    at most MAX_CUTS of them."""

    def __init__(self, cuts: bool = False) -> None:
        self.cuts: list[tuple[int, str | bool]] | None = [] if cuts else None
        self.member: object = None  # the top-level key whose value is being read
        self.depth = 0
        self.started = False  # the top-level value began (it must be an object)
        self.broken = False  # not a JSON object: vLLM answers 4xx, nothing streams
        self.in_string = False
        self.escape = False  # a string's backslash ended the last chunk
        self.expect_key = True
        self.capture: bytearray | None = None  # the key or value being read at depth 1
        self.capture_is_key = False
        self.literal: bytearray | None = None  # a bare value (true, 1, ...) being read at depth 1
        self.wanted = WATCHED
        self.pending_key: str | None = None  # the watched key whose value comes next
        # the last top-level value of each watched key, as JSON text (None: an object, an array, or too long)
        self.values: dict[str, bytes | None] = {}
        self.head: bytearray | None = bytearray()  # the first bytes, until a byte order mark is ruled out
        # where each watched key's last string value lies in the body as received: [start, end) offsets of its
        # JSON text, quotes included (the bridge renames a request's model in place: modelnames.py)
        self.spans: dict[str, tuple[int, int]] = {}
        # a watched key given twice at the top level (json.loads keeps the last; the bridge may have acted on the first)
        self.duplicate: str | None = None
        self.position = 0  # the body's offset of the next byte fed to the scanner
        self.value_start = 0  # the offset of the depth-1 string being read

    def _keep(self, part: bytes) -> None:
        target = self.literal if self.literal is not None else self.capture
        if target is None:
            return
        if len(target) + len(part) > CAPTURE:
            if self.literal is not None:
                self.literal = bytearray(b"?")  # too long to be a value read as true
            else:
                self.capture = None
            return
        target += part

    def _string_ended(self, end: int) -> None:
        if self.depth != 1:
            return
        if self.capture_is_key:
            key = self._decode(self.capture)
            self.pending_key = key if key in self.wanted else None
            if self.pending_key in self.values and self.duplicate is None:
                self.duplicate = self.pending_key
            self.member = key
            if self.cuts is not None and isinstance(key, str) and len(self.cuts) < MAX_CUTS:
                self.cuts.append((self.value_start, key))
        elif self.pending_key:
            self._found(self.capture, end)
        self.capture = None

    def _found(self, raw: bytearray | None, end: int | None = None) -> None:
        self.values[self.pending_key] = bytes(raw) if raw is not None else None
        if raw is not None and end is not None:
            self.spans[self.pending_key] = (self.value_start, end)
        else:
            self.spans.pop(self.pending_key, None)
        self.pending_key = None

    @staticmethod
    def _decode(raw: bytearray | None) -> object:
        if raw is None:
            return None
        try:
            return json.loads(bytes(raw))
        except (ValueError, RecursionError):
            return None

    def feed(self, data: bytes) -> None:
        if self.broken:
            return
        if self.head is not None:  # json.loads of bytes skips a UTF-8 byte order mark
            self.head += data
            if len(self.head) < 3 and BOM.startswith(self.head):
                return
            data, self.head = bytes(self.head), None
            if data.startswith(BOM):
                data, self.position = data[3:], 3
        base = self.position
        self.position += len(data)
        pos, end = 0, len(data)
        while pos < end:
            if self.in_string:
                if self.escape:
                    self._keep(data[pos:pos + 1])
                    pos += 1
                    self.escape = False
                    continue
                stop = string_stop(data, pos, end)
                if self.capture is not None:  # only a depth-1 key or value is kept: no copy of a long prompt
                    self._keep(data[pos:stop])
                pos = stop
                if pos >= end:
                    break
                if data[pos] == 0x5C:  # a backslash as the chunk's last byte: its pair comes next
                    self._keep(b"\\")
                    self.escape = True
                    pos += 1
                    continue
                self._keep(b'"')
                pos += 1
                self.in_string = False
                self._string_ended(base + pos)
                continue
            if self.literal is not None:
                stop = _LITERAL.match(data, pos).end()
                self._keep(data[pos:stop])
                pos = stop
                if pos >= end:
                    break
                literal, self.literal = self.literal, None
                if self.pending_key:
                    self._found(literal)
                continue
            if self.depth >= 2:
                found = _STRUCTURE.search(data, pos)
                if found is None:
                    break
                char, pos = data[found.start()], found.end()
                if char == 0x22:
                    self.in_string = True
                elif char in b"{[":
                    if self.depth == 2 and self.cuts is not None and self.member == SEGMENTED \
                            and len(self.cuts) < MAX_CUTS:
                        self.cuts.append((base + found.start(), True))
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth == 2 and self.cuts is not None and self.member == SEGMENTED \
                            and len(self.cuts) < MAX_CUTS:
                        self.cuts.append((base + pos, False))
                continue
            char = data[pos]
            pos += 1
            if char in _WHITESPACE:
                continue
            if self.depth == 0:
                if char == 0x7B and not self.started:
                    self.started, self.depth, self.expect_key = True, 1, True
                else:
                    self.broken = True  # not an object, or bytes after it
                    return
                continue
            # depth 1: the request object's own members
            if char == 0x22:
                self.in_string = True
                self.value_start = base + pos - 1
                self.capture_is_key = self.expect_key
                self.capture = bytearray(b'"') if (self.expect_key or self.pending_key) else None
            elif char == 0x3A:
                self.expect_key = False
            elif char == 0x2C:
                self.expect_key, self.pending_key = True, None
            elif char in b"{[":
                self.depth += 1
                if self.pending_key:
                    self._found(None)  # an object or array: pydantic refuses it as `stream`, and it names no model
            elif char == 0x7D:
                self.depth = 0
            elif char == 0x5D:
                self.broken = True
                return
            else:
                self.literal = bytearray([char])

    def finish(self) -> None:
        if self.head:
            head, self.head = bytes(self.head), None
            self.feed(head)
        if self.literal is not None:  # a bare value ending the body: `{"stream":true` is invalid anyway
            self.literal = None
        if self.depth != 0 or self.in_string or not self.started:
            self.broken = True

    def streaming(self) -> bool:
        """After the whole body: whether vLLM will validate `stream` as true."""
        value = self.values.get("stream")
        if self.broken or value is None:
            return False
        return streams(self._decode(bytearray(value)))

    def seen(self, key: str) -> bool:
        return key in self.values

    def model(self) -> str | None:
        """The top-level `model` when it is a string (the last one, as json.loads keeps), else None."""
        raw = self.values.get("model")
        value = self._decode(bytearray(raw)) if raw is not None else None
        return value if isinstance(value, str) else None
