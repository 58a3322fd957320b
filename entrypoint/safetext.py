"""Text from outside made safe where it enters: the one rule for everything a pod or `./build.py` shows.

Outside text is whatever prebake did not write itself: a member name of a downloaded archive, RunPod's problem
fields, the Hugging Face Hub's errors, vLLM's log lines, a client's request line. Before such text reaches a log
line, a record, the status page (JSON and text) or a terminal, it goes through `safe`:

1. secrets masked first (the caller's redactor), on the whole text, before anything is cut: a key cut in half is
   no longer a key the redactor knows (it also masks a part of 8 characters or more, redact.py);
2. control characters shown escaped, `\\x1b`, `\\x07`, `\\x9b`, `\\u2028`: C0 (line breaks and CR included, tab
   excepted), DEL, C1, the Unicode line separators, the bidirectional overrides (text that reads differently
   than it is) and lone surrogates (text that cannot be written as UTF-8); a terminal never receives an escape
   sequence, a log never a line it did not write;
3. the length capped (`limit` characters, escapes counted), the cut said with the text's full length.

Stdlib only: the launcher, the bridge and the build side (prebake/) all import it.
"""

from __future__ import annotations

import re
from typing import Callable

LIMIT = 500  # characters of one outside text in a line or a record
_CONTROL = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
CONTROLS = re.compile(f"[\\n{_CONTROL}]")
CONTROLS_BUT_LINE_BREAKS = re.compile(f"[{_CONTROL}]")
# The redactor reads at most this many characters per shown one: a mask can be shorter than what it hides.
READ_PER_SHOWN = 16


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object, limit: int | None = LIMIT, redact: Callable[[str], str] | None = None,
         lines: bool = False) -> str:
    """`text` as it may be shown: redacted, its controls escaped, at most `limit` characters (None: no cap).
    lines=True keeps line breaks ("\\n") for a message of several lines printed to a terminal."""
    text = text if isinstance(text, str) else str(text)
    whole = len(text)
    if limit is not None and whole > limit * READ_PER_SHOWN + 1024:
        text = text[:limit * READ_PER_SHOWN + 1024]  # never shown: masking cannot shrink the rest below limit
    if redact is not None:
        text = redact(text)
    controls = CONTROLS_BUT_LINE_BREAKS if lines else CONTROLS
    if limit is None or len(text) <= limit:
        return controls.sub(lambda m: _escaped(m.group()), text)
    out, used = [], 0
    for piece in re.split(f"({controls.pattern})", text[:limit]):
        shown = _escaped(piece) if len(piece) == 1 and controls.fullmatch(piece) else piece
        if used + len(shown) > limit:
            out.append(shown[:limit - used] if shown is piece else "")  # an escape is never cut in half
            break
        out.append(shown)
        used += len(shown)
    return "".join(out) + f"… ({whole} characters)"
