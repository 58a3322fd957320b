"""The self-test's one door to the image's entrypoint package: its launcher's and its bridge's modules, and vLLM's
facts as the launcher and the bridge know them (vllm_facts.json).

The self-test checks the image's own entrypoint, not the checkout's: the package is imported from the folder that
holds it (/opt/prebake/entrypoint in the image; a stand-in package of another name in the unit tests), so its name
is known only at run time. This module is the one place that imports it, and only the modules named in MODULES
(tests/unit/test_boundaries.py reads them); the programs here import it by name (`import entrypoint_door`, from
their own folder), the checks and launcher_argv.py relatively. Standard library only.
"""

import importlib
import json
import os
import subprocess
import sys

# What the self-test reads of the image's entrypoint, relative to the package.
MODULES = frozenset({
    "launcher.knobs", "launcher.main",  # the argv sweep (launcher_argv.py)
    "launcher.catalogue", "launcher.thinking", "launcher.runner",  # thinking-controls' inputs
    "launcher.modelinfos",  # modelinfos
    "serving.auth",  # sleep-mode: the paths the bridge refuses
})
FACTS = "vllm_facts.json"
HERE = os.path.dirname(os.path.abspath(__file__))  # on a child program's PYTHONPATH, to come in


def image_module(entrypoint_dir: str, name: str):
    """The image's `<package>.<name>` (e.g. "launcher.knobs"), imported from the folder that holds the package."""
    if name not in MODULES:
        raise ValueError(f"{name} is not one of the entrypoint modules the self-test reads (entrypoint_door.MODULES)")
    folder = os.path.abspath(entrypoint_dir)
    sys.path.insert(0, os.path.dirname(folder))
    try:
        return importlib.import_module(f"{os.path.basename(folder)}.{name}")
    finally:
        sys.path.pop(0)


def vllm_facts_path(entrypoint_dir: str) -> str:
    return os.path.join(entrypoint_dir, FACTS)


def vllm_facts(entrypoint_dir: str) -> dict:
    """vLLM's facts as the image's launcher and bridge read them. Raises OSError or ValueError."""
    with open(vllm_facts_path(entrypoint_dir), encoding="utf-8") as f:
        return json.load(f)


def child_command(entrypoint_dir: str, script: str) -> tuple[list[str], dict[str, str]]:
    """A Python child (its argv and environment) that runs `script` with `door` (this module) and `ENTRYPOINT` (the
    folder) defined: for a read that must not share this process's imports (the image's Python without vLLM). This
    module's folder goes first on the child's PYTHONPATH."""
    boot = f"import entrypoint_door as door; ENTRYPOINT = {os.path.abspath(entrypoint_dir)!r}\n"
    path = os.pathsep.join([HERE, *filter(None, [os.environ.get("PYTHONPATH")])])
    return [sys.executable, "-c", boot + script], dict(os.environ, PYTHONPATH=path)


class ChildFailed(Exception):
    """A child program printed no JSON verdict: the message names the program and shows its stderr's tail."""


def run_child_json(entrypoint_dir: str, script: str, what: str, timeout: float):
    """Run `script` as child_command does and return the JSON its last stdout line holds (its verdict).
    Raises ChildFailed naming `what` (e.g. "the bridge's auth module") with the exit status and stderr's tail when it
    timed out, exited non-zero or printed no JSON."""
    try:
        argv, env = child_command(entrypoint_dir, script)
        child = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"{what} did not finish in {timeout:g} s (a child Python reading {entrypoint_dir})") from None
    lines = child.stdout.strip().splitlines()
    try:
        if child.returncode != 0 or not lines:
            raise ValueError
        return json.loads(lines[-1])
    except ValueError:
        said = child.stderr.strip()[-1200:] or f"no stderr; its stdout ended: {child.stdout.strip()[-300:]!r}"
        raise ChildFailed(f"{what} did not run (exit {child.returncode}): {said}") from None
