"""The lock: the stack's whole Python set with exact versions and hashes, made by `uv pip compile`."""

import fnmatch
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from prebake.errors import PrebakeError
from prebake.variants import REST_LAYER, Stack

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


def split_lock(lock_text: str, layers: tuple[tuple[str, tuple[str, ...]], ...],
               lock_path: Path) -> list[tuple[str, str]]:
    """The lock's entries as one requirements file per layer: [(layer name, text)], in install order.

    A package goes to the first layer with a pattern (fnmatch, on the normalised name) that matches
    it; the rest to REST_LAYER. Only `name==version --hash=...` lines: the lock's '# via' comments
    change with other packages, and a layer's file must change only when its own packages do.
    """
    groups: dict[str, list[str]] = {name: [] for name, _ in layers}
    groups[REST_LAYER] = []
    matched = {pattern: False for _, patterns in layers for pattern in patterns}
    for m in _ENTRY.finditer(lock_text):
        name = _normalise(m["name"])
        target = REST_LAYER
        for layer, patterns in layers:
            hits = [p for p in patterns if fnmatch.fnmatchcase(name, _normalise(p))]
            if hits:
                matched.update(dict.fromkeys(hits, True))
                target = layer
                break
        hashes = re.findall(r"--hash=\S+", m["rest"])
        groups[target].append(" \\\n    ".join([m[0].split()[0], *hashes]))
    unused = [f"{layer}: {pattern!r}" for layer, patterns in layers for pattern in patterns if not matched[pattern]]
    if unused:
        raise PrebakeError(f"{lock_path}: the stack's python_layers name packages the lock does not hold "
                           f"({'; '.join(unused)}); fix the patterns or refresh the lock with `./build.py lock`")
    return [(name, "".join(entry + "\n" for entry in entries)) for name, entries in groups.items() if entries]


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
