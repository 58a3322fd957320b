"""Moved into report.py; this name stays only until the imports that still use it move too."""

from .report import Decision  # noqa: F401
