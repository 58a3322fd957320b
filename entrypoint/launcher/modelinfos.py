"""vLLM's model-info cache, baked at build time, put where vLLM reads it before vLLM starts.

vLLM 0.27.1's registry (model_executor/models/registry.py, `_LazyRegisteredModel.inspect_model_cls`) reads
`$VLLM_CACHE_ROOT/modelinfos/<module>-<class>.json` and uses it when its `hash` is the one of the model
module's source; otherwise it inspects the class in a subprocess that imports vLLM again (7-27 s of a new
pod). The build makes those files with the image's own vLLM (templates/files/modelinfo_bake.py) under
/opt/prebake/modelinfos, with a manifest. A baked file is copied only where the target is missing or holds
another hash, and only when the baked hash is the one of the module source the image's vLLM has now: a file
vLLM wrote for another module source is never replaced by one this vLLM would not read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..untrusted import create_exclusive, read_json
from .report import Decision

# /opt/prebake/modelinfos in the image: beside the entrypoint's folder
BAKED_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "modelinfos")
MANIFEST = "modelinfos.json"
SUBFOLDER = "modelinfos"  # under VLLM_CACHE_ROOT, vLLM's `_get_cache_dir`


@dataclass(frozen=True)
class Baked:
    architecture: str
    file: str  # vLLM's file name, `<module>-<class>.json` with dots as dashes
    hash: str  # the module source's hash vLLM computed at build time
    source: str  # the module's source under the vllm package: a .py file, or a package's __init__.py


def load_baked(folder: str = BAKED_DIR) -> tuple[Baked, ...] | None:
    """The baked entries, or None when the image has none (no vLLM in it, or built before this existed)."""
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as handle:
            entries = json.load(handle)["architectures"]
        return tuple(Baked(arch, e["file"], e["hash"], e["source"]) for arch, e in sorted(entries.items()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ()  # damaged: nothing is copied; the self-test's modelinfos check names it


def module_hash(source: Path) -> str:
    """vLLM's `_get_modelinfo_module_hash`: md5 (sha256 where FIPS refuses md5) over each file's path relative
    to the module's folder and its bytes; a package's __init__.py stands for every .py file under it."""
    paths = sorted(source.parent.rglob("*.py")) if source.name == "__init__.py" else [source]
    try:
        hasher = hashlib.md5(usedforsecurity=False)
    except ValueError:
        hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.relative_to(source.parent).as_posix().encode("utf-8") + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()


def vllm_package() -> Path | None:
    """The image's vllm package folder, found without importing vLLM."""
    spec = importlib.util.find_spec("vllm")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def vllm_cache_root(env: Mapping[str, str]) -> str:
    """VLLM_CACHE_ROOT as vllm/envs.py resolves it (an empty value counts as set, as there)."""
    default = os.path.join(env.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")), "vllm")
    return os.path.expanduser(env.get("VLLM_CACHE_ROOT", default))


def stored_hash(path: str) -> str | None:
    """The hash of the model info vLLM finds at `path` on the volume; None when absent or set aside (then the copy
    replaces it)."""
    found = read_json(path, "modelinfo")
    return found.get("hash") if isinstance(found, dict) else None


def decide_modelinfos(env: Mapping[str, str], folder: str = BAKED_DIR,
                      package: Path | None = None) -> tuple[dict[str, str], Decision]:
    """The copies to make (target -> baked file) and the decision that says which and why."""
    baked = load_baked(folder)
    if not baked:
        why = (f"{folder}/{MANIFEST} is damaged: run the image's self-test" if baked == () else
               "this image has no baked model-info cache (no vLLM in it, or built before the build made one)")
        return {}, Decision("modelinfos", "none copied", why)
    package = package or vllm_package()
    if package is None:
        return {}, Decision("modelinfos", "none copied", "no vllm package on this Python's path to check them against")
    target_dir = os.path.join(vllm_cache_root(env), SUBFOLDER)
    copies, present, foreign = {}, [], []
    for entry in baked:
        source = package / entry.source
        if not source.is_file() or module_hash(source) != entry.hash:
            foreign.append(entry.architecture)  # this vLLM would not read it: left to vLLM's own inspection
            continue
        target = os.path.join(target_dir, entry.file)
        if stored_hash(target) == entry.hash:
            present.append(entry.architecture)
        else:
            copies[target] = os.path.join(folder, SUBFOLDER, entry.file)
    parts = [f"{len(copies)} copied to {target_dir}" + (f" ({', '.join(_arch(baked, copies))})" if copies else "")]
    if present:
        parts.append(f"{len(present)} already there")
    if foreign:
        parts.append(f"{len(foreign)} not for this image's vLLM module source, left alone ({', '.join(foreign)})")
    return copies, Decision("modelinfos", "; ".join(parts),
                            "vLLM's registry reads them instead of inspecting the model class in a subprocess "
                            "that imports vLLM again; baked at build time by the image's vLLM")


def _arch(baked: tuple[Baked, ...], copies: Mapping[str, str]) -> list[str]:
    names = {os.path.basename(target) for target in copies}
    return [entry.architecture for entry in baked if entry.file in names]


def copy_modelinfos(copies: Mapping[str, str]) -> str | None:
    """Make the copies (each atomically: vLLM never reads half a file); None, or the one line that says why not.
    A failure only costs the start vLLM's own inspection."""
    for target, baked in copies.items():
        temporary = f"{target}.prebake-{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _remove(temporary)  # whatever another start left at this name (a link is removed, never followed)
            with open(baked, "rb") as source, create_exclusive(temporary) as out:
                out.write(source.read())
            os.replace(temporary, target)
        except OSError as err:
            _remove(temporary)
            return (f"modelinfos: cannot copy {baked} to {target} ({err.strerror or err}): vLLM inspects the model "
                    "class in its subprocess instead")
    return None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
