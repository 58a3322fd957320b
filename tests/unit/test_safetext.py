"""The one rule for outside text (entrypoint/safetext.py) and the redactor's parts of a secret (redact.py)."""

from __future__ import annotations

import pytest

from entrypoint.redact import MASK, Redactor
from entrypoint.safetext import safe

KEY = "rpa_N3x8Kq2Vb7Lm4Rt9Ws1Yz6Hc5Jd0Fg8Pe3Ua2Io7"


@pytest.mark.parametrize("raw, shown", [
    ("a\x1b]0;t\x07b", "a\\x1b]0;t\\x07b"), ("\x1b[2J\r\n", "\\x1b[2J\\x0d\\x0a"), ("c\x9b31m", "c\\x9b31m"),
    ("\u2028\u202e\ud800", "\\u2028\\u202e\\ud800"), ("tab\tkept", "tab\tkept"), ("é ✓", "é ✓"),
])
def test_controls_are_shown_escaped(raw, shown):
    assert safe(raw) == shown


def test_the_cap_counts_escapes_never_cuts_one_and_says_the_length():
    assert safe("x" * 1000, 20) == "x" * 20 + "… (1000 characters)"
    assert safe("ab" + "\x1b" * 50, 9) == "ab\\x1b… (52 characters)"  # the next escape would pass 9: left out whole
    assert len(safe("\x1b" * (1 << 20))) < 600


def test_line_breaks_kept_for_a_message_of_several_lines():
    assert safe("one\ntwo\x1b", None, lines=True) == "one\ntwo\\x1b"


def test_a_secret_is_masked_before_the_cut():
    redact = Redactor({"RUNPOD_API_KEY": KEY})
    text = "d" * 490 + KEY
    assert "rpa_N3x8K" in text[:500]
    shown = safe(text, 500, redact)
    assert shown.endswith(MASK) and "rpa_" not in shown


@pytest.mark.parametrize("text", [
    f"x {KEY[:8]} y", f"x {KEY[:30]}", f"{KEY[-8:]} y", f"{KEY[5:20]}", f"at the end: {KEY[3:15]}",
    f"{KEY[10:30]} at the start",
])
def test_a_part_of_8_characters_or_more_is_masked(text):
    shown = Redactor({"RUNPOD_API_KEY": KEY})(text)
    assert not any(KEY[start:start + 8] in shown for start in range(len(KEY) - 7)), shown
    assert MASK in shown


def test_shorter_parts_paths_and_sentences_are_left_alone():
    redact = Redactor({"RUNPOD_API_KEY": KEY, "HF_TOKEN_PATH": "/root/.cache/huggingface/token",
                       "PUBLIC_KEY": "ssh-ed25519 AAAAC3Nza user@host"})
    assert redact(f"x {KEY[:7]} y") == f"x {KEY[:7]} y"
    assert redact("read /root/.cache/huggingface/hub") == "read /root/.cache/huggingface/hub"
    assert redact("ssh-ed25519 is a key type") == "ssh-ed25519 is a key type"
