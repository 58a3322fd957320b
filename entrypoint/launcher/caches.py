"""Every start-time cache under one root on the persistent volume (caches.toml).

A new or reset pod loses its container disk; the volume survives. With the caches
there, the second start of a pod compiles nothing that the first one compiled
(Inductor, Triton, FlashInfer, humming, CuTe DSL, the driver's PTX JIT). A
variable the user already set wins: it is only reported.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # the image runs 3.11/3.12; this keeps older interpreters working
    import tomli as tomllib

from .report import Decision, LaunchError

# entrypoint/: the data files sit beside launch.py, where the build side reads them too
CACHES_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "caches.toml")
VOLUME = "/workspace"  # where RunPod mounts the pod's volume
MOUNTINFO = "/proc/self/mountinfo"


@dataclass(frozen=True)
class Cache:
    variable: str
    path: str  # under the root; "" when `value` is set instead
    value: str  # a literal value (e.g. a size), "" for a path
    library: str
    reads_in: str
    evidence: tuple[str, ...]  # every one of them is in reads_in
    holds: str


def load_caches(path: str = CACHES_PATH) -> tuple[Cache, ...]:
    try:
        with open(path, "rb") as handle:
            entries = tomllib.load(handle)["cache"]
        return tuple(Cache(e["variable"], e.get("path", ""), e.get("value", ""), e["library"], e["reads_in"],
                           tuple([e["evidence"]] if isinstance(e["evidence"], str) else e["evidence"]) if e["evidence"] else (),
                           e["holds"]) for e in entries)
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as err:
        raise LaunchError(subject=path, value=None,
                          problem=f"{path}: cannot read the cache table ({err}); the image is damaged",
                          fix="rebuild it.") from None


def mount_points(mountinfo: str = MOUNTINFO) -> set[str]:
    """Mount points of this container (field 5 of /proc/self/mountinfo, octal escapes undone)."""
    try:
        with open(mountinfo, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def cache_root(raw: str | None, mountinfo: str = MOUNTINFO) -> tuple[str | None, str]:
    """(root or None, why) from VL_CACHE_ROOT's value: a path, "off", or None (automatic)."""
    if raw == "off":
        return None, "VL_CACHE_ROOT=off: every cache stays where its library puts it"
    if raw:
        return raw, "VL_CACHE_ROOT"
    if VOLUME in mount_points(mountinfo):
        return VOLUME, f"{VOLUME} is a mounted volume (VL_CACHE_ROOT unset)"
    return None, (f"no volume at {VOLUME} and VL_CACHE_ROOT unset: caches stay on the container disk, "
                  "and a new pod compiles again")


def check_root(root: str, source: str) -> None:
    """The root must be a folder the launcher's user can write, or one it can create: vLLM and the
    compilers would otherwise fail minutes later, deep in a compile, on their first cache write."""
    fix = "set VL_CACHE_ROOT to a writable folder (the pod's volume, /workspace), or VL_CACHE_ROOT=off"
    if os.path.lexists(root) and not os.path.isdir(root):
        raise LaunchError(subject="VL_CACHE_ROOT", value=root,
                          problem=f"{source}: the cache root {root} is not a folder (a file is there)", fix=f"{fix}.")
    existing = root
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing) or "/"
    if not os.path.isdir(existing):
        raise LaunchError(subject="VL_CACHE_ROOT", value=root,
                          problem=f"{source}: the cache root {root} cannot be created: {existing} is a file",
                          fix=f"{fix}.")
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise LaunchError(subject="VL_CACHE_ROOT", value=root,
                          problem=f"{source}: the cache root {root} is on a read-only file system ({existing})",
                          fix=f"{fix}.")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == root else f"cannot be created ({existing} is not writable)"
        raise LaunchError(subject="VL_CACHE_ROOT", value=root,
                          problem=f"{source}: the cache root {root} {what} for this user (uid {os.getuid()})",
                          fix=f"{fix}.")


def decide_caches(raw_root: str | None, env: Mapping[str, str],
                  caches: tuple[Cache, ...] | None = None,
                  mountinfo: str = MOUNTINFO) -> tuple[dict[str, str], list[Decision]]:
    """The variables to set, and one decision for the root plus one per variable kept as the user set it."""
    root, why = cache_root(raw_root, mountinfo)
    if root is None:
        return {}, [Decision("caches", "not moved", why)]
    check_root(root, f"VL_CACHE_ROOT={raw_root}" if raw_root else f"VL_CACHE_ROOT unset, {why}")
    changes: dict[str, str] = {}
    kept = []
    for cache in caches if caches is not None else load_caches():
        if env.get(cache.variable):
            kept.append(cache.variable)
            continue
        changes[cache.variable] = cache.value or os.path.join(root, cache.path)
    decisions = [Decision("caches", f"under {root}: " + " ".join(sorted(changes)), why)]
    if kept:
        decisions.append(Decision("caches", "kept as set: " + " ".join(kept),
                                  "a cache variable set in the environment wins over VL_CACHE_ROOT"))
    return changes, decisions
