"""What the launcher says: each Decision with its reason (what --dry-run prints, what a log line says), or the
one error it stops with, a LaunchError that carries a message for a human and an exit code."""

from __future__ import annotations

from dataclasses import dataclass

# The exit codes are the contract's (what the container's exit says, whichever process ends it).
from ..contract import EXIT_BUG, EXIT_CONFIG, EXIT_HOST, EXIT_MARKER, EXIT_WATCHDOG  # noqa: F401


@dataclass(frozen=True)
class Decision:
    topic: str  # e.g. "compat", "context", "speculation"
    decision: str  # what was decided, e.g. "max-model-len 1000000"
    why: str  # the reason, with the numbers that led to it

    def as_json(self) -> dict[str, str]:
        return {"topic": self.topic, "decision": self.decision, "why": self.why}


class LaunchError(Exception):
    """Stops the launcher before anything runs; `str(err)` says what, where and what to do."""

    def __init__(self, message: str, exit_code: int = EXIT_CONFIG) -> None:
        super().__init__(message)
        self.exit_code = exit_code
