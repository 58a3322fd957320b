"""Stack-level self-test verdicts, recorded per stack image so an unchanged stack is not checked again.

A record is a JSON file named by a key over: the stack image's ID (the digest of its config,
which lists its layers' content digests: the same ID is the same files, whatever the name or
tag), the part of the spec the stack checks read, and the checks' own code. Only passing
verdicts are recorded; anything else in the key changing means no record, so the checks run.
Records live in $PREBAKE_STATE_DIR/selftest (default ~/.cache/prebake/selftest); deleting
the folder is always safe.
"""

import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from prebake.incontainer.checks import BY_NAME
from prebake.incontainer.common import STACK

PACKAGE = Path(__file__).with_name("incontainer")
# What a stack check may read from the spec; the variant's own parts (marker path, launcher
# conf) are for the variant checks.
# flashinfer-aot reads the variant's module list: the image it is recorded for (the variant's FROM) is
# its kernels image, or the stack where the variant lists none.
STACK_SPEC_KEYS = ("pins", "imports", "cuda", "cuda_arch", "flashinfer_aot")


def state_dir() -> Path:
    root = os.environ.get("PREBAKE_STATE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prebake"
    return Path(root) / "selftest"


def stack_checks(names: list[str]) -> list[str]:
    return [name for name in names if BY_NAME[name].LEVEL == STACK]


PACKAGE_SUFFIXES = (".py", ".jinja")  # .jinja: chat templates the programs render (programs/qwen_system_first.jinja)


def package_files() -> list[Path]:
    """What goes into the container (and into the cache key): the package's modules and the data its programs read."""
    return sorted(path for path in PACKAGE.rglob("*") if path.suffix in PACKAGE_SUFFIXES and path.is_file()
                  and "__pycache__" not in path.parts)


def _code_digest() -> str:
    digest = hashlib.sha256()
    for path in package_files():
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(stack_image_id: str, spec: dict[str, Any]) -> str:
    content = {"stack_image_id": stack_image_id, "checks": stack_checks(spec["checks"]),
               "spec": {k: spec.get(k) for k in STACK_SPEC_KEYS}, "code": _code_digest()}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def load(stack_image_id: str, spec: dict[str, Any]) -> list[dict] | None:
    """The recorded report items of the spec's stack checks, or None when they must run."""
    path = state_dir() / f"{key(stack_image_id, spec)}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    items = record.get("report") if record.get("stack_image_id") == stack_image_id else None
    if not isinstance(items, list) or [i.get("check") for i in items] != stack_checks(spec["checks"]) \
            or not all(i.get("ok") is True for i in items):
        return None
    return items


def save(stack_image_id: str, spec: dict[str, Any], report: list[dict]) -> None:
    """Record the stack checks' items of `report` if every one of them ran and passed."""
    names = stack_checks(spec["checks"])
    items = [item for item in report if item["check"] in names]
    if [i["check"] for i in items] != names or not all(i["ok"] for i in items):
        return
    folder = state_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{key(stack_image_id, spec)}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"stack_image_id": stack_image_id,
                                   "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                   "report": items}, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # no record only means the checks run again next time


def verdicts_key(stack_image_id: str, image_env: list[str]) -> str:
    """vLLM's verdict on an argv depends on the stack's vLLM, the environment it parses in (the
    variant image's ENV), and the parsing code; not on the launcher that made the argv."""
    content = {"stack_image_id": stack_image_id, "env": sorted(image_env), "code": _code_digest()}
    return "verdicts-" + hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def load_verdicts(key: str) -> dict[str, str | None]:
    """argv (as JSON) -> vLLM's error for it (None: accepted), as recorded; {} when none."""
    try:
        verdicts = json.loads((state_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(verdicts, dict) or not all(v is None or isinstance(v, str) for v in verdicts.values()):
        return {}
    return verdicts


def _write_record(name: str, data: dict) -> None:
    """One record, written whole or not at all; none only means vLLM is asked again next time."""
    try:
        state_dir().mkdir(parents=True, exist_ok=True)
        path = state_dir() / name
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:
        pass


def save_verdicts(key: str, verdicts: dict[str, str | None]) -> None:
    _write_record(f"{key}.json", verdicts)


def load_facts(key: str) -> dict[str, Any] | None:
    """vLLM's facts (programs/vllm_facts_derive.py) recorded under a verdicts key: the same stack, environment and code."""
    try:
        facts = json.loads((state_dir() / f"facts-{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) and isinstance(facts.get("facts"), dict) \
        and isinstance(facts.get("sleep"), dict) else None


def save_facts(key: str, facts: dict[str, Any]) -> None:
    _write_record(f"facts-{key}.json", facts)


def load_program_results(key: str) -> dict[str, dict]:
    """The passing reports of the vLLM programs (thinking-controls, claude-code-sessions) recorded under a verdicts
    key, each under the key the check made of the plugins and its launcher inputs (incontainer/program_records.py)."""
    try:
        results = json.loads((state_dir() / f"programs-{key}.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(results, dict) or not all(isinstance(v, dict) and v.get("ok") is True for v in results.values()):
        return {}
    return results


def save_program_results(key: str, results: dict[str, dict]) -> None:
    _write_record(f"programs-{key}.json", results)
