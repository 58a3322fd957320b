"""A vLLM program's passing outcome, kept under exactly what it depends on, for checks that run one.

What thinking-controls and claude-code-sessions find depends on the stack's vLLM, the image's environment and
the self-test's own code (the host keys the records it sends on those three, as for vLLM's verdicts on argvs:
prebake/selftest_record.py), and on two things of the variant's layers, which are keyed here: the vLLM plugins
installed (every `vllm.general_plugins` entry point and the files of its package: vLLM loads them all) and what
the program takes from the launcher (the check passes it in, as `inputs`). An entrypoint change that leaves
both alone, such as the launcher's comments or the bridge, is answered from the record; anything else runs
the program. Only a passing outcome is kept: a failure is always found again.
"""

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re

GROUP = "vllm.general_plugins"


def _package_files(module: str) -> list[str]:
    spec = importlib.util.find_spec(module.split(".")[0])  # finds, does not import
    if spec is None or not spec.origin:
        return []
    if not spec.submodule_search_locations:
        return [spec.origin]
    found = []
    for folder in spec.submodule_search_locations:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            found += [os.path.join(root, name) for name in sorted(files) if not name.endswith(".pyc")]
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def plugins_digest(pins) -> str:
    """Over every vllm.general_plugins entry point (name, target) and its package's files; for a distribution the
    lock pins (vLLM's own resolvers), its version: the stack's files, which the host's key covers."""
    digest = hashlib.sha256()
    pinned = {_normal(name): version for name, version in pins.items()}
    for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        digest.update(f"{point.name}={point.value}\0".encode())
        dist = _normal(point.dist.metadata["Name"]) if point.dist is not None else None
        if dist in pinned:
            digest.update(f"{dist}=={pinned[dist]}\0".encode())
            continue
        for path in _package_files(point.module):
            with open(path, "rb") as f:
                digest.update(path.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def key(spec, check: str, inputs) -> str:
    content = {"check": check, "plugins": plugins_digest(spec["pins"]), "inputs": inputs}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def recorded(spec, record_key: str):
    """The program's report recorded under `record_key` (sent by the host), or None."""
    report = (spec.get("known_program_results") or {}).get(record_key)
    return report if isinstance(report, dict) and report.get("ok") is True else None


def to_record(record_key: str, report) -> dict:
    """The report item's extra data for the host: the report, when it passed."""
    return {"program_results": {record_key: report}} if report.get("ok") is True else {}
