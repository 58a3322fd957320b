"""What the launcher says: each Decision with its reason (what --dry-run prints, what a log line says), or the
one error it stops with, a LaunchError: what failed, the value, what is wrong, what to do and an exit code, in
one wording (render)."""

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


def render(problem: str, fix: str) -> str:
    """The one wording of a launch error: what is wrong, then what to do; a fix written as its own sentence
    (capitalised) follows a full stop, any other follows a colon."""
    if not fix:
        return problem
    return f"{problem}{'. ' if fix[0].isupper() else ': '}{fix}"


class LaunchError(Exception):
    """Stops the launcher before anything runs; `str(err)` says what, where and what to do.

    The fields, for a reader other than a human: `subject` (the variable, file, key, option or program that
    failed), `value` (what it was given, as given; None where there is no one value), `problem` (what is
    wrong, in the words users see), `fix` (what to do) and `exit_code`. `LaunchError(message)` alone still
    works: the whole message is the problem."""

    def __init__(self, message: str = "", exit_code: int = EXIT_CONFIG, *, subject: str = "",
                 value: str | None = None, problem: str = "", fix: str = "") -> None:
        self.problem = problem or message
        self.fix = fix
        self.subject = subject
        self.value = value
        self.exit_code = exit_code
        super().__init__(render(self.problem, fix))

    def as_json(self) -> dict[str, str | int | None]:
        return {"subject": self.subject, "value": self.value, "problem": self.problem, "fix": self.fix,
                "exit_code": self.exit_code, "message": str(self)}
