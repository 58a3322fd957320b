"""The real Claude Code CLI at each supported version (entrypoint/claudecode.toml), for the tests that run it.

.ci/run installs each version from npm into /opt/claude-code/<version> (PREBAKE_CLAUDE_CODE_ROOT moves it);
a `claude` on PATH stands for the version it reports. A version found nowhere is a skipped test that says
how to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from prebake.tomlfile import read_toml

from .hosts import ROOT

ROOT_VARIABLE = "PREBAKE_CLAUDE_CODE_ROOT"
DEFAULT_ROOT = "/opt/claude-code"


def supported() -> dict[str, str]:
    """{"oldest": version, "newest": version}."""
    return dict(read_toml(ROOT / "entrypoint" / "claudecode.toml")["supported"])


def versions() -> list[str]:
    return list(dict.fromkeys(supported().values()))


def _version_of(binary: str) -> str | None:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.split()[0] if done.returncode == 0 and done.stdout.strip() else None


def binary(version: str) -> str | None:
    """The `claude` of that version, or None."""
    installed = Path(os.environ.get(ROOT_VARIABLE) or DEFAULT_ROOT) / version / "bin" / "claude"
    if installed.is_file() and os.access(installed, os.X_OK):
        return str(installed)
    on_path = shutil.which("claude")
    return on_path if on_path and _version_of(on_path) == version else None


def install_hint(version: str) -> str:
    return (f"Claude Code {version} is not installed: .ci/run installs it, or `npm install -g --prefix "
            f"{DEFAULT_ROOT}/{version} @anthropic-ai/claude-code@{version}`")
