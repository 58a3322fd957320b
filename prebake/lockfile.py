"""The lock: the stack's whole Python set with exact versions and hashes, made by `uv pip compile`."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from prebake.errors import PrebakeError
from prebake.variants import Stack

# One entry of a `uv pip compile --generate-hashes` file: "name==version \" then "    --hash=..." lines.
_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>\S+)(?P<rest>(?:\s*\\\n\s+--hash=\S+)*)",
                    re.MULTILINE)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions(lock_text: str) -> dict[str, str]:
    return {_normalise(m["name"]): m["version"] for m in _ENTRY.finditer(lock_text)}


def pinned_version(lock_text: str, name: str) -> str | None:
    return pinned_versions(lock_text).get(_normalise(name))


def requirement_line(lock_text: str, requirement: str, lock_path: Path) -> str:
    """`requirement` ('uv==0.13.9') as one requirements-file line with its hashes from the lock."""
    name, _, version = requirement.partition("==")
    for m in _ENTRY.finditer(lock_text):
        if _normalise(m["name"]) == _normalise(name):
            if version and m["version"] != version:
                raise PrebakeError(f"{lock_path}: locks {m['name']}=={m['version']} but the stack's installer is "
                                   f"{requirement}; refresh the lock with `./build.py lock`")
            hashes = re.findall(r"--hash=\S+", m["rest"])
            if not hashes:
                raise PrebakeError(f"{lock_path}: {m['name']} has no hashes; refresh the lock with `./build.py lock`")
            return " ".join([f"{m['name']}=={m['version']}", *hashes])
    raise PrebakeError(f"{lock_path}: the installer {requirement} is not in the lock; add it to the stack's "
                       "requirements and refresh the lock with `./build.py lock`")


def compile_lock(stack: Stack, upgrade: bool = False) -> str:
    """Resolve the stack's requirements in one run of uv and return the lock's text (nothing is written)."""
    uv = shutil.which("uv")
    if uv is None:
        raise PrebakeError("`uv` is not on PATH; install it with `python3 -m pip install uv` and run again")
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.in"
        requirements.write_text("\n".join(stack.requirements) + "\n")
        output = Path(tmp) / "lock.txt"
        command = [
            uv, "pip", "compile", str(requirements), "--output-file", str(output), "--generate-hashes",
            "--python-version", stack.python_version, "--python-platform", "x86_64-manylinux_2_28",
            "--no-header", "--quiet",
        ]
        if stack.lock.exists() and not upgrade:
            shutil.copy(stack.lock, output)  # uv keeps the versions already locked unless told to upgrade
        else:
            command.append("--upgrade")
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise PrebakeError(f"uv could not resolve the stack's requirements:\n{result.stderr.strip()}")
        header = ("# The stack's Python set, resolved in one run by `./build.py lock` from [stack].requirements.\n"
                  "# Builds install exactly this, with hashes and no resolution. DO NOT EDIT by hand.\n")
        return header + output.read_text()
