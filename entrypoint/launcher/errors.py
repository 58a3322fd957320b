"""The one error type the launcher raises: a message for a human, and an exit code."""

from __future__ import annotations

# The exit codes are the contract's (what the container's exit says, whichever process ends it).
from ..contract import EXIT_BUG, EXIT_CONFIG, EXIT_HOST, EXIT_MARKER, EXIT_WATCHDOG  # noqa: F401


class LaunchError(Exception):
    """Stops the launcher before anything runs; `str(err)` says what, where and what to do."""

    def __init__(self, message: str, exit_code: int = EXIT_CONFIG) -> None:
        super().__init__(message)
        self.exit_code = exit_code
