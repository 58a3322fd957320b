"""Which model of the swap set a request names, and the name vLLM gets instead of one it does not serve.

The bridge reads `model` as it streams the body (serving/streamflag.py); here are the names (Claude Code's, and its
background shape, are claudecode_wire.py's), and the two renames a request may get: a background call for the unloaded model is
answered by the loaded one, and any `claude-*` name the pod does not serve (Claude Code's own names,
`claude-opus-4-8`, `claude-haiku-4-5-20251001`, whatever its next release sends) by the loaded model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .claudecode_wire import claude_names, is_claude_name
from .vllmoptions import served_names  # noqa: F401 - the names vLLM answers to, read from its argv


@dataclass(frozen=True)
class NameMap:
    """Every name a client may send for each model of the set: its served name, claude-<name>, and
    claude-<name>[1m] (Claude Code strips the suffix and sends a beta header, other clients keep it)."""

    by_name: dict[str, str]

    @classmethod
    def of(cls, served: Iterable[str]) -> NameMap:
        names = {}
        for name in served:
            for spelling in (name, *claude_names(name)):
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
        if not requested or not is_claude_name(requested) or requested in self.by_model.get(model, ()):
            return None
        return model
