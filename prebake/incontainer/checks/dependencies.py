"""dependencies: `uv pip check` finds no conflict in the venv."""

import subprocess
import sys

from ..common import STACK

NAME = "dependencies"
LEVEL = STACK


def check(spec):
    result = subprocess.run(["uv", "pip", "check", "--python", sys.executable], capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0, output.splitlines()[-1] if output else "no output"
