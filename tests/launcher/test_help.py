"""`launch.py --help` prints the launcher's own help anywhere: no marker, no GPU, no vLLM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prebake_testing.hosts import LAUNCH, ROOT
from entrypoint.launcher.report import EXIT_MARKER
from entrypoint.launcher.knobs import KNOBS
from entrypoint.launcher.usage import EXIT_CODES


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    # No marker, an nvidia-smi that does not exist and no vllm on PATH: what a laptop has.
    env = {"PATH": str(tmp_path), "VL_PREBAKED_MARKER": str(tmp_path / "no-marker"),
           "VL_NVIDIA_SMI": str(tmp_path / "no-nvidia-smi"), "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, str(LAUNCH), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--max-model-len", "4096", "--help"], ["--dry-run", "-h"]])
def test_help_needs_no_marker_nor_gpu(args: list[str], tmp_path: Path) -> None:
    result = run(args, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: launch.py") and result.stderr == ""
    assert not [k.name for k in KNOBS if f"  {k.name}" not in result.stdout]
    for code, _ in EXIT_CODES:
        assert f"\n  {code}  " in result.stdout


def test_without_help_the_marker_is_still_required(tmp_path: Path) -> None:
    result = run(["--dry-run"], tmp_path)
    assert result.returncode == EXIT_MARKER and "usage:" not in result.stdout


def test_every_exit_code_is_documented() -> None:
    """docs/troubleshooting.md has a row for each exit code the launcher can end with."""
    doc = (ROOT / "docs" / "troubleshooting.md").read_text()
    assert not [code for code, _ in EXIT_CODES if f"\n| {code} |" not in doc]



def test_every_exit_code_constant_is_in_the_help() -> None:
    """A new EXIT_* constant in the launcher's code needs its line in usage.EXIT_CODES (and in the docs)."""
    import re
    defined = {int(value) for path in (ROOT / "entrypoint").rglob("*.py")
               for value in re.findall(r"^EXIT_[A-Z_]+ *= *(\d+)", path.read_text(), flags=re.M)}
    assert defined and defined <= {code for code, _ in EXIT_CODES}, defined
