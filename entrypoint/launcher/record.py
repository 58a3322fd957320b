"""A decision and the reason for it: what --dry-run prints, and what a log line says."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    topic: str  # e.g. "compat", "context", "speculation"
    decision: str  # what was decided, e.g. "max-model-len 1000000"
    why: str  # the reason, with the numbers that led to it

    def as_json(self) -> dict[str, str]:
        return {"topic": self.topic, "decision": self.decision, "why": self.why}
