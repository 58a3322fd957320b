"""Secrets kept out of everything a pod publishes: the vLLM log file, the status page, the journal, and every
argv the launcher prints (the one place that redacts them: `Redactor.argv`).

Three nets. The environment's own secrets: the value of every variable whose name says token, key,
secret, password or credential (HF_TOKEN, VLLM_API_KEY, RUNPOD_API_KEY, PREBAKE_REGISTRY_PASSWORD,
AWS_SECRET_ACCESS_KEY...) is replaced wherever it appears. And the shapes of secrets that are not in
the environment: Hugging Face, OpenAI-style, GitHub and RunPod tokens, `Bearer ...`, and the value
after a secret-named option or field (`--api-key X`, `'api_key': ['X']`, `hf_token=X`). And the user and
password of any URL (`http://user:password@host`, HF_ENDPOINT's included). In an argv, the values of a
secret-named option are replaced whatever they look like (`--hf-token X`, `--api-key=X`, `--api-key K1 K2`).
An environment secret is also masked where only a part of it (PART characters or more) is left: its start or its
end anywhere, any part of it at the text's start or end (a message cut through the key). Callers that cut a text
redact it first (safetext.safe does both in that order).
"""

from __future__ import annotations

import re
from typing import Mapping

MASK = "[redacted]"
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
# Shorter values are too common to replace everywhere (and too weak to be a real credential).
MIN_SECRET_LENGTH = 6
# A part of a secret this long or longer is masked too, where it begins or ends the secret or the text: what a cut
# leaves of it.
PART = 8
# VL_* knobs are settings, never secrets (VL_MODEL_KEY=ornith would otherwise blank a model name).
NOT_SECRETS = ("VL_",)
_SHAPES = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|\b(?:sk|rpa|pk)[-_][A-Za-z0-9_-]{16,}"  # OpenAI-style, RunPod
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|\bglpat-[A-Za-z0-9_-]{16,}"  # GitLab
)
_BEARER = re.compile(r"(\b(?:Bearer|Basic)\s+)[^\s'\",]+", re.IGNORECASE)
# A secret-named option or field, then its value: --api-key X, api_key=X, "hf_token": "X", 'api_key': ['X'].
_SECRET_WORD = r"[\w-]*(?:token|api[_-]?key|secret|password|passwd)"
_NAMED = re.compile(
    r"((?:--" + _SECRET_WORD + r"(?:\s+|=)|\b" + _SECRET_WORD + r"\b['\"]?\s*[:=]\s*)"
    r"(?![\[(]?b?['\"]?(?:None|null|False|True|\[redacted\]|[\])])(?:\W|$))\[?['\"]?)([^\s'\",}\]]+)", re.IGNORECASE)

# The same in a repr, as vLLM logs them: an argv as a list (`'--hf-token', 'X'`, `"--api-key", "K1", "K2"`, up to
# the next option) and its non-default arguments as a dict (`'hf_token': 'X'`, `'api_key': ['K1', 'K2']`).
_QUOTED = r"""b?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""  # a Python or JSON string literal
_LISTED_OPTION = re.compile(r"""(['"])--""" + _SECRET_WORD + r"""\1((?:\s*,\s*(?!b?['"]-)""" + _QUOTED + r")+)",
                            re.IGNORECASE)
_KEYED_VALUE = re.compile(r"""(['"])""" + _SECRET_WORD + r"""\1\s*:\s*(""" + _QUOTED
                          + r"|[\[(]\s*" + _QUOTED + r"(?:\s*,\s*" + _QUOTED + r")*\s*,?\s*[\])])", re.IGNORECASE)
_LITERAL = re.compile(_QUOTED)


def _mask_literals(values: str) -> str:
    """Each string literal of `values` with its content masked."""
    out, last = [], 0
    for literal in _LITERAL.finditer(values):
        text = literal.group(0)
        quote_at = 1 if text.startswith("b") else 0
        out.append(values[last:literal.start()] + text[:quote_at + 1] + MASK + text[-1])
        last = literal.end()
    return "".join(out) + values[last:]


def _mask_reprs(text: str) -> str:
    text = _LISTED_OPTION.sub(lambda m: m.group(0)[:m.start(2) - m.start(0)] + _mask_literals(m.group(2)), text)
    return _KEYED_VALUE.sub(lambda m: m.group(0)[:m.start(2) - m.start(0)] + _mask_literals(m.group(2)), text)


# scheme://user[:password]@ -> scheme://[redacted]@ (the host stays: it says where the pod talks to)
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@'\"]+@")
# An option whose values are secrets: --api-key, --hf-token, --token, --password, --client-secret...
_SECRET_OPTION = re.compile(r"--?" + _SECRET_WORD, re.IGNORECASE)
_NUMBER = re.compile(r"-[0-9.]+(e-?[0-9]+)?")


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NUMBER.fullmatch(token)


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    values = {value for name, value in environ.items()
              if SECRET_NAME.search(name) and not name.startswith(NOT_SECRETS) and len(value) >= MIN_SECRET_LENGTH}
    return tuple(sorted(values, key=len, reverse=True))  # a longer secret first: it may contain a shorter one


def _part_spans(text: str, value: str) -> list[tuple[int, int]]:
    """Where `text` holds PART or more characters that begin `value` or end it (a key cut at a line's or a
    message's limit, the rest of it in the next), or any PART of it that begins or ends the text."""
    spans = []
    for head in (True, False):
        needle = value[:PART] if head else value[-PART:]
        at = text.find(needle)
        while at >= 0:
            start, end = at, at + PART
            if head:
                while end - start < len(value) and end < len(text) and text[end] == value[end - start]:
                    end += 1
            else:
                while end - start < len(value) and start > 0 and text[start - 1] == value[-(end - start) - 1]:
                    start -= 1
            spans.append((start, end))
            at = text.find(needle, at + 1)
    # a text that begins or ends inside the secret (cut on both sides of the key): its first or last PART characters
    for edge, at in ((text[:PART], 0), (text[-PART:], len(text) - PART)):
        where = value.find(edge) if len(edge) == PART else -1
        if where >= 0:
            start, end, inner = at, at + PART, where
            if at == 0:
                while end < len(text) and inner + end < len(value) and text[end] == value[inner + end]:
                    end += 1
            else:
                while start > 0 and inner > 0 and text[start - 1] == value[inner - 1]:
                    start, inner = start - 1, inner - 1
            spans.append((start, end))
    return spans


def _mask_parts(text: str, values: tuple[str, ...]) -> str:
    spans = sorted(span for value in values for span in _part_spans(text, value))
    out, last = [], 0
    for start, end in spans:
        if end <= last:
            continue
        out.append(text[last:max(start, last)] + (MASK if start >= last else ""))
        last = end
    return "".join(out) + text[last:] if spans else text


def mask_values(text: str, values: tuple[str, ...]) -> str:
    """Each of `values` masked in `text`, whole, then the parts a cut leaves of those long enough to be keys (PART)."""
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    partial = tuple(value for value in values if len(value) > PART and not value.startswith(("/", "~"))
                    and not any(char.isspace() for char in value))  # a path (HF_TOKEN_PATH) or a sentence is no key
    return _mask_parts(text, partial) if partial else text


class Redactor:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.values = secret_values(environ)

    def __call__(self, text: str) -> str:
        text = mask_values(text, self.values)
        text = _SHAPES.sub(MASK, text)
        text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
        text = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
        return _NAMED.sub(lambda m: m.group(1) + MASK, _mask_reprs(text))

    def argv(self, argv: list[str] | tuple[str, ...]) -> list[str]:
        """An argv as it may be printed: every value of a secret-named option masked (all of them up to the
        next option: vLLM's --api-key takes several), then each token through the text nets."""
        shown, masking = [], False
        for token in argv:
            if _is_option(token):
                name, equals, _ = token.partition("=")
                masking = bool(_SECRET_OPTION.fullmatch(name)) and not name.startswith("--no-")
                shown.append(name + "=" + MASK if masking and equals else self(token))
                masking = masking and not equals
            else:
                shown.append(MASK if masking else self(token))
        return shown


def redact_argv(argv: list[str] | tuple[str, ...], environ: Mapping[str, str] | None = None) -> list[str]:
    """Redactor(environ).argv(argv): for a caller that has no redactor of its own."""
    return Redactor(environ or {}).argv(argv)
