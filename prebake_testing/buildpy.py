"""build.py run as a user runs it, and the tiny test stack it builds from tests/fixtures/images."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from . import REPO

FIXTURE_IMAGES = REPO / "tests" / "fixtures" / "images"
TEST_BASE = "prebake-test-base:bookworm"  # made once with `./build.py local-base` and kept (tests/integration)
TINY_ARGS = ("--images-dir", str(FIXTURE_IMAGES), "--base", TEST_BASE, "--without", "cuda-compat")
FORK_SOURCE_URL = "https://github.com/some-fork/prebake"  # PREBAKE_SOURCE_URL as a fork's CI sets it


def run_build_py(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(cwd / "build.py"), *args], capture_output=True, text=True,
                          env=env, cwd=cwd)


def parse_build_output(stdout: str) -> dict:
    """What a build printed on stdout: its tags, and its image, stack, size and time lines."""
    result = {"tags": []}
    for line in stdout.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "tag":
            result["tags"].append(value.split(" ")[0])
        elif key in ("image", "stack", "size", "time"):
            result[key] = value
    return result
