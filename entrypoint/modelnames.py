"""Which model of the swap set a request names, and whether it is one of Claude Code's background calls.

The bridge reads `model` as it streams the body (serving/streamflag.py); here are the names, the
background shape, and the two renames a request may get: a background call for the unloaded model is
answered by the loaded one, and any `claude-*` name the pod does not serve (Claude Code's own names,
`claude-opus-4-8`, `claude-haiku-4-5-20251001`, whatever its next release sends) by the loaded model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from .vllmoptions import served_names  # noqa: F401 - the names vLLM answers to, read from its argv

# Names Claude Code (and other Anthropic clients) send: answered by the pod's model when it does not serve them.
CLAUDE_PREFIX = "claude-"
# Claude Code's background calls (hooks, titles) are small; a main-loop request carries ~115 KB.
BACKGROUND_MAX_BYTES = 256 * 1024


def _json(data: bytes, kind: type):
    """The JSON value `data` holds when it is of `kind`, else None (not JSON, or another type)."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, kind) else None


def parse(body: bytes) -> dict | None:
    return _json(body, dict)


def is_background(path: str, body: bytes | None) -> bool:
    """Claude Code's background shape: Anthropic messages, no tools, thinking disabled or a JSON output
    format (what it sends for hooks, titles and topic checks), in a small body (None: a large one)."""
    if path != "/v1/messages" or body is None or len(body) > BACKGROUND_MAX_BYTES:
        return False
    request = parse(body)
    if request is None or request.get("tools"):
        return False
    thinking = request.get("thinking")
    output = request.get("output_config")
    return ((isinstance(thinking, dict) and thinking.get("type") == "disabled")
            or (isinstance(output, dict) and "format" in output))


@dataclass(frozen=True)
class NameMap:
    """Every name a client may send for each model of the set: its served name, claude-<name>, and
    claude-<name>[1m] (Claude Code strips the suffix and sends a beta header, other clients keep it)."""

    by_name: dict[str, str]

    @classmethod
    def of(cls, served: Iterable[str]) -> NameMap:
        names = {}
        for name in served:
            for spelling in (name, f"claude-{name}", f"claude-{name}[1m]"):
                names.setdefault(spelling, name)
        return cls(names)

    def model(self, requested: str | None) -> str | None:
        """The set's model a request names, or None: any other name goes to the model that is loaded."""
        return self.by_name.get(requested) if requested else None


@dataclass(frozen=True)
class ServedNames:
    """What vLLM answers to for each model of the pod (one model, or each of the swap set), keyed by the
    model's first served name."""

    by_model: dict[str, tuple[str, ...]]

    def rename(self, requested: str | None, model: str) -> str | None:
        """The name to send vLLM instead of `requested` when `model` serves the request, or None to keep it:
        a `claude-*` name that `model` does not serve gets `model`'s name; any other name stays (vLLM's 404)."""
        if not requested or not requested.startswith(CLAUDE_PREFIX) or requested in self.by_model.get(model, ()):
            return None
        return model
