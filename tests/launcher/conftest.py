"""The launcher tests' fixture: the REAL launcher command line against fake hosts (prebake_testing.hosts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prebake_testing.hosts import Launcher


@pytest.fixture
def launcher(tmp_path: Path) -> Launcher:
    return Launcher(tmp_path)
