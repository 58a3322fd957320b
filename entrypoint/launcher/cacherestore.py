"""Restoring vLLM's compile cache before vLLM starts (VL_CACHE_REPO; compilecache.py decides what and where).

Restoring never breaks a start: any failure (no repository, no network, 404, an archive that is corrupt,
truncated, foreign or hostile) is an Outcome "cold" with its reason, never an exception. The archive is read
twice: first every member checked (regular files and folders only, under torch_compile_cache/, no absolute
path or `..`, at most MAX_FILES files and MAX_UNPACKED bytes as declared), then extracted into a staging folder
on the same volume and each hash folder moved into place, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tarfile
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..contract import hf_token
from .compilecache import ARCHIVE_TOP, MANIFEST, CompileCache

MAX_ARCHIVE = 8 << 30  # bytes downloaded, at most
MAX_UNPACKED = 32 << 30  # bytes the members declare, at most (a size bomb is refused before a byte is written)
MAX_FILES = 200_000
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


def check_members(archive: tarfile.TarFile, key: str) -> list[tarfile.TarInfo]:
    """Every member, checked before anything is written (Refused on the first bad one)."""
    members, total, manifest = [], 0, None
    for member in archive:  # reads the whole stream: a truncated archive fails here
        name = member.name
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "\\" in name or not name:
            raise Refused(f"a member's path leaves the cache folder ({name!r})")
        if member.issym() or member.islnk():
            raise Refused(f"it holds a link ({name!r} -> {member.linkname!r})")
        if not (member.isfile() or member.isdir()):
            raise Refused(f"it holds a device, a FIFO or another special file ({name!r})")
        if name == MANIFEST:
            manifest = archive.extractfile(member).read(1 << 20)
            continue
        if parts[0] != ARCHIVE_TOP:
            raise Refused(f"a member is outside {ARCHIVE_TOP}/ ({name!r})")
        total += member.size
        if total > MAX_UNPACKED or len(members) >= MAX_FILES:
            raise Refused(f"it unpacks to more than {MAX_UNPACKED >> 30} GiB or {MAX_FILES} files (a size bomb?)")
        members.append(member)
    if manifest is None:
        raise Refused(f"it has no {MANIFEST}: not a prebake compile cache")
    try:
        found = json.loads(manifest).get("key")
    except (ValueError, AttributeError):
        found = None
    if found != key:
        raise Refused(f"it is another pod's cache (key {str(found)[:16]}, this pod's {key[:16]})")
    return members


def extract(path: str, cache: CompileCache, abandoned: threading.Event) -> dict:
    """Check, extract into a staging folder beside the cache, then move each hash folder into place."""
    os.makedirs(cache.vllm_cache_root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".prebake-restore-", dir=cache.vllm_cache_root)
    try:
        try:
            with tarfile.open(path, "r:*") as archive:
                members = check_members(archive, cache.key)
                size = sum(m.size for m in members)
                free = shutil.disk_usage(cache.vllm_cache_root).free
                if size > free // 2:
                    raise Refused(f"it unpacks to {size >> 20} MiB and the volume has {free >> 20} MiB free")
                # filter="data": Python's own refusal of links, absolute paths and special files, once more
                archive.extractall(staging, members=members, filter="data")
        except (tarfile.TarError, EOFError, ValueError, zlib.error, gzip.BadGzipFile) as err:
            first = (str(err).splitlines() or [""])[0].rstrip(":")[:200]
            raise Refused(f"it cannot be read ({type(err).__name__}: {first}): corrupt or truncated") from None
        if abandoned.is_set():
            raise Refused("the restore ran out of time")
        moved = place(os.path.join(staging, ARCHIVE_TOP), os.path.join(cache.vllm_cache_root, ARCHIVE_TOP))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"bytes": size, "files": sum(1 for m in members if m.isfile()), "folders": moved}


def place(source: str, target: str) -> list[str]:
    """The hash folders of `source` (and of its torch_aot_compile/) moved under `target`; one already there wins."""
    moved = []
    for sub in ("", "torch_aot_compile"):
        folder = os.path.join(source, sub)
        if not os.path.isdir(folder):
            continue
        os.makedirs(os.path.join(target, sub), exist_ok=True)
        for name in sorted(os.listdir(folder)):
            if sub == "" and name == "torch_aot_compile":
                continue
            destination = os.path.join(target, sub, name)
            if not os.path.exists(destination):
                os.rename(os.path.join(folder, name), destination)
                moved.append(os.path.join(sub, name) if sub else name)
    return moved


def _hub_problem(err: BaseException) -> tuple[str, bool]:
    """(the line's reason, whether the repository lacks the archive: then this start publishes it)."""
    name = type(err).__name__
    if "EntryNotFound" in name:
        return "not in the repository yet", True
    if "RepositoryNotFound" in name:
        return "the repository does not exist, or is private and HF_TOKEN cannot read it", False
    if "GatedRepo" in name:
        return "the repository is gated for this token", False
    first = (str(err).splitlines() or [""])[0][:200]
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
            why, missing = _hub_problem(err)
            return Outcome("cold", why, publish=missing and cache.publish)
        if os.path.getsize(path) > MAX_ARCHIVE:
            return Outcome("cold", f"the archive is over {MAX_ARCHIVE >> 20} MiB: refused")
        try:
            done = extract(path, cache, abandoned)
        except Refused as err:
            return Outcome("cold", f"the archive was refused: {err}")
        except OSError as err:
            return Outcome("cold", f"the archive could not be written under {cache.vllm_cache_root} ({err})")
        return Outcome("restored", f"{done['files']} files, {done['bytes'] >> 20} MiB into "
                                   f"{os.path.join(cache.vllm_cache_root, ARCHIVE_TOP)}", extra=done)
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
