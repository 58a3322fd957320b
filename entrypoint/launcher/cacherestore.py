"""Restoring vLLM's compile cache before vLLM starts (VL_CACHE_REPO; compilecache.py decides what and where).

Restoring never breaks a start: any failure (no repository, no network, 404, an archive that is corrupt,
truncated, foreign or hostile) is an Outcome "cold" with one short reason, never an exception. The archive is
read once, as a stream, one header at a time (tarstream.py: every header, name and size bounded before it is
read, nothing kept of a member once the next is read): its first member must be the manifest with this pod's
key; then each member is checked (regular files and folders only, under torch_compile_cache/, no absolute path,
`..`, backslash or control character, under its triton/ only a kernel's .cubin and .json files, at most MAX_FILES
members and MAX_UNPACKED bytes, or half the volume's free space, as declared) before its data is written into a
staging folder on the same volume (a Triton kernel's __grp__ index rewritten to name its files where they land);
each key folder is moved into place at the end, so a failure leaves nothing half-written. A member name shown in a
reason is cut and escaped (safetext.py).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..contract import hf_token
from ..redact import Redactor
from ..safetext import CONTROLS, safe
from ..untrusted import KINDS, SetAside, create_exclusive, nesting, parse_json
from . import tarstream
from .compilecache import (ARCHIVE_TOP, KEYED_FOLDERS, MANIFEST, TRITON_CARRIED, TRITON_FOLDER, CompileCache,
                           triton_path_ok)

MAX_ARCHIVE = 8 << 30  # bytes downloaded, at most
MAX_UNPACKED = 32 << 30  # bytes the members declare, at most (a size bomb is refused before a byte is written)
MAX_FILES = 200_000  # members, the manifest and folders included
MAX_MANIFEST = 1 << 20
MAX_TRITON_GROUP = 64 << 10  # bytes of a Triton kernel's __grp__ index (a few hundred in practice)
TRITON_GROUP = "__grp__"
NAME_SHOWN = 120  # characters of a member's name in a reason
RESTORE_TIMEOUT_S = 300.0  # download and extraction; past it the start goes on cold


class Refused(Exception):
    """The archive is not one this pod may extract: the message says why."""


@dataclass
class Outcome:
    state: str  # "restored", "cold"
    why: str
    publish: bool = False  # the repository lacks this key: publish after the first healthy start
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"state": self.state, "why": self.why, "publish": self.publish, "seconds": round(self.seconds, 1),
                **self.extra}


def _shown(name: str) -> str:
    return f"'{safe(name, NAME_SHOWN)}'"


def check_member(member: tarstream.Member) -> list[str]:
    """The parts of a member's path under the cache root (Refused when it may not be written)."""
    name = member.name
    parts = name.rstrip("/").split("/") if member.isdir() else name.split("/")
    if name.startswith("/") or ".." in parts or "\\" in name or not name or "" in parts or "." in parts:
        raise Refused(f"a member's path leaves the cache folder ({_shown(name)})")
    if CONTROLS.search(name):
        raise Refused(f"a member's name holds a control character ({_shown(name)})")
    if member.islink():
        raise Refused(f"it holds a link ({_shown(name)} -> {_shown(member.linkname)})")
    if not (member.isfile() or member.isdir()):
        raise Refused(f"it holds a device, a FIFO or another special file ({_shown(name)})")
    if name == MANIFEST:
        raise Refused("it holds a second manifest")
    if parts[0] != ARCHIVE_TOP:
        raise Refused(f"a member is outside {ARCHIVE_TOP}/ ({_shown(name)})")
    if len(parts) > 1 and parts[1] == TRITON_FOLDER and not triton_path_ok(parts[1:], member.isdir()):
        raise Refused(f"a member under {ARCHIVE_TOP}/{TRITON_FOLDER}/ is not a Triton kernel's "
                      f"{' or '.join(TRITON_CARRIED)} file ({_shown(name)})")
    return parts


def _manifest(member: tarstream.Member | None, key: str) -> None:
    if member is None or member.name != MANIFEST or not member.isfile():
        raise Refused(f"it does not begin with {MANIFEST}: not a prebake compile cache")
    if member.size > MAX_MANIFEST:
        raise Refused(f"its manifest is {member.size} bytes, over {MAX_MANIFEST}")
    try:
        found = parse_json(member.read(MAX_MANIFEST), KINDS["compile_cache_manifest"]).get("key")
    except SetAside as err:
        raise Refused(f"its manifest was set aside: {err}") from None
    if found != key:
        raise Refused(f"it is another pod's cache (key {safe(found, 16)}, this pod's {key[:16]})")


def triton_group(data: bytes, folder: str) -> bytes:
    """A Triton kernel's __grp__<name>.json, its files' paths pointing into `folder`, where the restore puts them.

    Triton 3.7.1 (runtime/cache.py FileCacheManager.get_group) lists a kernel's files by absolute path and ignores
    those that do not exist: as archived they name the publishing pod's folder, and a pod whose volume is elsewhere
    would compile the kernel again. Each path is made here from the file's own name, never taken from the archive."""
    children = None
    if nesting(data) <= 2:  # {"child_paths": {...}}: checked before parsing, as every untrusted file (untrusted.py)
        try:
            children = json.loads(data)["child_paths"]
        except (ValueError, KeyError, TypeError):
            pass
    if not isinstance(children, dict):
        raise Refused("a Triton kernel's __grp__ index is not Triton's JSON")
    if any("/" in name or name in ("", ".", "..") or CONTROLS.search(name) for name in children):
        raise Refused("a Triton kernel's __grp__ index names a file outside its folder")
    kept = {name: os.path.join(folder, name) for name in children if name.endswith(TRITON_CARRIED)}
    return json.dumps({"child_paths": kept}).encode()


def _write(member: tarstream.Member, staging: str, parts: list[str], root: str) -> None:
    """A folder, or a file's data in chunks, under staging (which holds no link: none is ever written there);
    root: where staging's contents end up (a Triton kernel's __grp__ index names its files there)."""
    path = os.path.join(staging, *parts)
    try:
        if member.isdir():
            os.makedirs(path, exist_ok=True)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = create_exclusive(path)
    except (FileExistsError, NotADirectoryError, IsADirectoryError):
        raise Refused(f"a member's path is there twice ({_shown(member.name)})") from None
    with handle:
        if parts[1:2] == [TRITON_FOLDER] and parts[-1].startswith(TRITON_GROUP):
            if member.size > MAX_TRITON_GROUP:
                raise Refused(f"a Triton kernel's __grp__ index is {member.size} bytes, over {MAX_TRITON_GROUP}")
            handle.write(triton_group(member.read(MAX_TRITON_GROUP), os.path.join(root, *parts[:-1])))
        while chunk := member.read(tarstream.CHUNK):
            handle.write(chunk)
    os.utime(path, (member.mtime, member.mtime))  # the publisher tells restored folders from new ones by time


def unpack(path: str, key: str, staging: str, free: int, abandoned: threading.Event, root: str) -> dict:
    """Check and write every member of the archive at `path` into staging, as the stream is read; root: the
    folder staging's members are moved into (VLLM_CACHE_ROOT)."""
    budget = min(MAX_UNPACKED, free // 2)
    totals = {"bytes": 0, "files": 0, "members": 1}
    with tarstream.open_stream(path) as stream:
        reader = tarstream.members(stream)
        _manifest(next(reader, None), key)
        for member in reader:
            if abandoned.is_set():
                raise Refused("the restore ran out of time")
            totals["members"] += 1
            if totals["members"] > MAX_FILES:
                raise Refused(f"it holds more than {MAX_FILES} members (a size bomb?)")
            parts = check_member(member)
            totals["bytes"] += member.size
            if totals["bytes"] > budget:  # declared in its header: refused before any of its data is read
                over = f"{MAX_UNPACKED >> 30} GiB" if budget == MAX_UNPACKED else \
                    f"{budget >> 20} MiB, half the volume's free space"
                raise Refused(f"it unpacks to more than {over} (a size bomb?)")
            totals["files"] += member.isfile()
            _write(member, staging, parts, root)
    return totals


def extract(path: str, cache: CompileCache, abandoned: threading.Event) -> dict:
    """Check and extract into a staging folder beside the cache, then move each hash folder into place."""
    os.makedirs(cache.vllm_cache_root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".prebake-restore-", dir=cache.vllm_cache_root)
    try:
        free = shutil.disk_usage(cache.vllm_cache_root).free
        try:
            done = unpack(path, cache.key, staging, free, abandoned, cache.vllm_cache_root)
        except (tarstream.OverLimit, SetAside) as err:
            raise Refused(str(err)) from None
        except (tarstream.Unreadable, EOFError, zlib.error, gzip.BadGzipFile) as err:
            first = safe((str(err).splitlines() or [""])[0].rstrip(":"), 200)
            raise Refused(f"it cannot be read ({type(err).__name__}: {first}): corrupt or truncated") from None
        if abandoned.is_set():
            raise Refused("the restore ran out of time")
        moved = place(os.path.join(staging, ARCHIVE_TOP), os.path.join(cache.vllm_cache_root, ARCHIVE_TOP))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    kernels = [folder for folder in moved if folder.startswith(TRITON_FOLDER + "/")]
    return {"bytes": done["bytes"], "files": done["files"], "folders": [f for f in moved if f not in kernels],
            "triton_folders": len(kernels)}


def place(source: str, target: str) -> list[str]:
    """The key folders of `source` (and of its KEYED_FOLDERS: torch_aot_compile/, triton/) moved under `target`;
    one already there wins."""
    moved = []
    for sub in ("", *KEYED_FOLDERS):
        folder = os.path.join(source, sub)
        if not os.path.isdir(folder):
            continue
        os.makedirs(os.path.join(target, sub), exist_ok=True)
        for name in sorted(os.listdir(folder)):
            if sub == "" and name in KEYED_FOLDERS:
                continue
            destination = os.path.join(target, sub, name)
            if not os.path.exists(destination):
                os.rename(os.path.join(folder, name), destination)
                moved.append(os.path.join(sub, name) if sub else name)
    return moved


def _hub_problem(err: BaseException, redact: Callable[[str], str]) -> tuple[str, bool]:
    """(the line's reason, whether the repository lacks the archive: then this start publishes it)."""
    name = type(err).__name__
    if "EntryNotFound" in name:
        return "not in the repository yet", True
    if "RepositoryNotFound" in name:
        return "the repository does not exist, or is private and HF_TOKEN cannot read it", False
    if "GatedRepo" in name:
        return "the repository is gated for this token", False
    first = safe((str(err).splitlines() or [""])[0], 200, redact)
    return f"the Hub could not be reached or refused ({name}: {first})", False


def restore(cache: CompileCache, env: Mapping[str, str], timeout_s: float = RESTORE_TIMEOUT_S,
            stopped: Callable[[], bool] = lambda: False) -> Outcome:
    """Download and extract the archive, within timeout_s (or until `stopped` says the pod stops); never raises."""
    began = time.monotonic()
    abandoned = threading.Event()
    result: list[Outcome] = []

    def work() -> None:
        result.append(_restore(cache, env, abandoned))

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    deadline = began + timeout_s
    while worker.is_alive() and time.monotonic() < deadline and not stopped():
        worker.join(0.2)
    if not result and stopped():
        abandoned.set()
        return Outcome("cold", "the pod is stopping", seconds=time.monotonic() - began)
    if not result:
        abandoned.set()  # a late download is never extracted: vLLM may be compiling into the folder by then
        return Outcome("cold", f"no answer from the Hub within {timeout_s:g} s", seconds=time.monotonic() - began)
    outcome = result[0]
    outcome.seconds = time.monotonic() - began
    return outcome


def _restore(cache: CompileCache, env: Mapping[str, str], abandoned: threading.Event) -> Outcome:
    try:
        from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
        from huggingface_hub.utils import disable_progress_bars
    except ImportError as err:
        return Outcome("cold", f"huggingface_hub cannot be imported ({err})")
    disable_progress_bars()
    token = hf_token(env) or False  # False: never a token file of the home folder, only HF_TOKEN's
    endpoint = env.get("HF_ENDPOINT") or None
    download = tempfile.mkdtemp(prefix=".prebake-download-", dir=_existing(cache.vllm_cache_root))
    try:
        try:
            url = hf_hub_url(cache.repo_id, cache.path_in_repo, repo_type=cache.repo_type, endpoint=endpoint)
            size = get_hf_file_metadata(url, token=token, endpoint=endpoint).size
            if size and size > MAX_ARCHIVE:
                return Outcome("cold", f"the archive is {size >> 20} MiB, over {MAX_ARCHIVE >> 20} MiB: refused")
            path = hf_hub_download(cache.repo_id, cache.path_in_repo, repo_type=cache.repo_type, token=token,
                                   endpoint=endpoint, local_dir=download)
        except Exception as err:  # noqa: BLE001 - whatever the Hub or the network does, the start goes on cold
            why, missing = _hub_problem(err, Redactor(env))
            return Outcome("cold", why, publish=missing and cache.publish)
        if os.path.getsize(path) > MAX_ARCHIVE:
            return Outcome("cold", f"the archive is over {MAX_ARCHIVE >> 20} MiB: refused")
        try:
            done = extract(path, cache, abandoned)
        except Refused as err:
            return Outcome("cold", f"the archive was refused: {err}")
        except OSError as err:
            return Outcome("cold", f"the archive could not be written under {cache.vllm_cache_root} ({safe(err, 200)})")
        return Outcome("restored", f"{done['files']} files, {done['bytes'] >> 20} MiB into "
                                   f"{os.path.join(cache.vllm_cache_root, ARCHIVE_TOP)}, "
                                   f"{done['triton_folders']} Triton kernel folders", extra=done)
    finally:
        shutil.rmtree(download, ignore_errors=True)


def _existing(folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    return folder


def describe(outcome: Outcome, cache: CompileCache) -> str:
    if outcome.state == "restored":
        return f"restored {cache.where()} in {outcome.seconds:.1f} s: {outcome.why}"
    then = ("; published once vLLM serves" if outcome.publish else
            "; not published (HF_TOKEN unset)" if "not in the repository" in outcome.why and not cache.publish else "")
    return f"cold start: {cache.where()}: {outcome.why}{then}"
