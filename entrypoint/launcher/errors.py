"""Moved into report.py; this name stays only until the imports that still use it move too."""

from .report import EXIT_BUG, EXIT_CONFIG, EXIT_HOST, EXIT_MARKER, EXIT_WATCHDOG, LaunchError  # noqa: F401
