"""Moved into knobs.py (check_settings, check_numa_nodes); this name stays only until the imports that still use
it move too."""

from .knobs import check_numa_nodes, check_settings  # noqa: F401
