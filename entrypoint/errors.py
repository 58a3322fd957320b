"""The one error type the launcher raises: a message for a human, and an exit code."""

from __future__ import annotations

# Exit codes, so that a RunPod log or a test can tell the families apart.
EXIT_CONFIG = 2  # a VL_* value, a container argument or the catalogue is wrong
EXIT_HOST = 3  # no GPU, nvidia-smi missing or failing, driver too old
EXIT_MARKER = 4  # the image was not prebaked (marker missing or unreadable)
EXIT_WATCHDOG = 6  # the bridge's watchdog gave up on a vLLM that stopped answering /health (serving/watchdog.py)
EXIT_BUG = 1  # anything else: a launcher bug, reported in one line (tests allow only 0 and 2-4)


class LaunchError(Exception):
    """Stops the launcher before anything runs; `str(err)` says what, where and what to do."""

    def __init__(self, message: str, exit_code: int = EXIT_CONFIG) -> None:
        super().__init__(message)
        self.exit_code = exit_code
