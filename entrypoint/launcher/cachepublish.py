"""The compile cache's publisher: once vLLM first answers /health, the folders it compiled into during this start
are archived and uploaded to VL_CACHE_REPO (compilecache.py says what and why).

It runs detached from the launcher (`python -m entrypoint.launcher.cachepublish`, started before vLLM, re-parented to tini), at the lowest
CPU priority, and only after vLLM serves: it never delays serving. The token comes from the environment (never
argv, which `ps` shows); no line, status file or archive member holds it: every file is read before it is
archived, and a file that contains the token stops the publish.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from typing import Callable, Iterator, Mapping

from ..contract import hf_token
from ..safetext import safe
from .cacherestore import MAX_ARCHIVE, MAX_FILES, MAX_UNPACKED
from .compilecache import (ARCHIVE_TOP, KEYED_FOLDERS, MANIFEST, TRITON_FOLDER, CompileCache,
                           triton_path_ok, write_status)

HEALTH_POLL_S = 2.0
HEALTH_WAIT_S = 6 * 3600.0  # a cold start of a large model, weights downloaded first
UPLOAD_TIMEOUT_S = 3600.0


class NotPublished(Exception):
    """Nothing is uploaded: the message says why."""


def new_folders(root: str, since: float) -> list[str]:
    """The key folders under root/torch_compile_cache holding a file written at or after `since`: the ones vLLM
    compiled into during this start (<10 hex>/, torch_aot_compile/<64 hex>/), flashinfer_autotune/ and the Triton
    kernels (triton/<52 base32>/) where the launcher points FlashInfer's autotune results and Triton's cache
    (caches.toml). Restored ones keep the archive's times."""
    top = os.path.join(root, ARCHIVE_TOP)
    found = []
    for sub in ("", *KEYED_FOLDERS):
        where = os.path.join(top, sub)
        if not os.path.isdir(where):
            continue
        for name in sorted(os.listdir(where)):
            path = os.path.join(where, name)
            if (sub == "" and name in KEYED_FOLDERS) or os.path.islink(path) or not os.path.isdir(path):
                continue
            folder = os.path.join(sub, name) if sub else name  # Triton's tmp.* folders hold no archived file
            if any(os.lstat(os.path.join(top, file)).st_mtime >= since for file in archived_files(top, folder)):
                found.append(folder)
    return found


def archived_files(top: str, folder: str) -> Iterator[str]:
    """The files of one key folder that go into the archive (paths relative to `top`): regular files only (links
    never travel: a restore refuses them), and of a Triton kernel only what loads it (TRITON_CARRIED)."""
    for where, dirs, names in os.walk(os.path.join(top, folder)):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(where, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            parts = os.path.relpath(path, top).split(os.sep)
            if parts[0] == TRITON_FOLDER and not triton_path_ok(parts, folder=False):
                continue
            yield os.path.relpath(path, top)


def check_bounds(files: int, size: int) -> None:
    """NotPublished when the archive is one every restore would refuse (cacherestore's bounds)."""
    if files + 1 > MAX_FILES or size > MAX_UNPACKED:
        raise NotPublished(f"{files} files, {size >> 20} MiB: over what a restore accepts ({MAX_FILES} members, "
                           f"{MAX_UNPACKED >> 30} GiB)")


def build_archive(cache: CompileCache, folders: list[str], out: str, secret: str | None) -> dict:
    """A tar.gz of the folders' archived files and the manifest; NotPublished when a file holds the token, or the
    archive would be over a restore's bounds."""
    top = os.path.join(cache.vllm_cache_root, ARCHIVE_TOP)
    listed = [relative for folder in folders for relative in archived_files(top, folder)]
    check_bounds(len(listed), sum(os.path.getsize(os.path.join(top, relative)) for relative in listed))
    files = size = 0
    needle = secret.encode() if secret else None
    with tarfile.open(out, "w:gz", compresslevel=3) as archive:
        manifest = json.dumps({"key": cache.key, "facts": dict(cache.facts), "folders": folders,
                               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime = len(manifest), int(time.time())
        archive.addfile(info, io.BytesIO(manifest))
        for relative in listed:
            path = os.path.join(top, relative)
            with open(path, "rb") as handle:
                data = handle.read()
            name = os.path.join(ARCHIVE_TOP, relative)
            if needle and needle in data:
                raise NotPublished(f"{name} contains HF_TOKEN's value")
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(os.path.getmtime(path)), 0o644
            archive.addfile(info, io.BytesIO(data))
            files, size = files + 1, size + len(data)
    if os.path.getsize(out) > MAX_ARCHIVE:
        raise NotPublished(f"the archive is {os.path.getsize(out) >> 20} MiB: over what a restore downloads "
                           f"({MAX_ARCHIVE >> 20} MiB)")
    return {"files": files, "bytes": size, "archive_bytes": os.path.getsize(out),
            "triton_folders": sum(folder.startswith(TRITON_FOLDER + "/") for folder in folders)}


def alive(pid: int | None) -> bool:
    """The launcher (or, with VL_BRIDGE=off, vLLM in its place) still runs: once it is gone, nothing will serve.
    One that exited but is not reaped yet (a zombie: its parent has not waited for it) is gone too."""
    if not pid:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:  # no /proc here: what kill said
        return True


def wait_healthy(url: str, deadline_s: float, poll_s: float = HEALTH_POLL_S, launcher: int | None = None) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and alive(launcher):
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(poll_s)
    return False


def publish(cache: CompileCache, env: Mapping[str, str], since: float) -> dict:
    """Archive what vLLM compiled since `since` and upload it, unless the repository has it by now."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    secret = hf_token(env)
    if not secret:
        raise NotPublished("HF_TOKEN is unset")
    api = HfApi(endpoint=env.get("HF_ENDPOINT") or None, token=secret)
    if api.file_exists(cache.repo_id, cache.path_in_repo, repo_type=cache.repo_type):
        raise NotPublished("the repository has it now (another pod published it)")
    folders = new_folders(cache.vllm_cache_root, since)
    if not folders:
        raise NotPublished(f"vLLM wrote no compile cache in this start under {cache.vllm_cache_root}/{ARCHIVE_TOP} "
                           "(it was already on the volume, or compilation is off)")
    handle, out = tempfile.mkstemp(prefix=".prebake-publish-", suffix=".tar.gz", dir=cache.vllm_cache_root)
    os.close(handle)
    try:
        done = build_archive(cache, folders, out, secret)
        api.upload_file(path_or_fileobj=out, path_in_repo=cache.path_in_repo, repo_id=cache.repo_id,
                        repo_type=cache.repo_type,
                        commit_message=f"prebake compile cache {cache.key[:16]} ({cache.facts.get('vllm')}, "
                                       f"{(cache.facts.get('gpus') or ['?'])[0]})")
    finally:
        os.unlink(out)
    return {**done, "folders": [folder for folder in folders if not folder.startswith(TRITON_FOLDER + "/")]}


def run(cache: CompileCache, env: Mapping[str, str], health_url: str, since: float, run_dir: str | None,
        log: Callable[[str], None], health_wait_s: float = HEALTH_WAIT_S, launcher: int | None = None,
        redact: Callable[[str], str] = lambda text: text) -> int:
    """log: already redacting; redact: for what goes to the status file (the page redacts again)."""
    try:
        os.nice(19)  # after vLLM serves, gzip competes with the tokenizer and the bridge: it yields to both
    except OSError:
        pass
    if not wait_healthy(health_url, health_wait_s, launcher=launcher):
        write_status(run_dir, {"publish": {"state": "not published", "why": "vLLM never served"}})
        return 0
    began = time.monotonic()
    write_status(run_dir, {"publish": {"state": "publishing", "why": f"vLLM serves; uploading to {cache.where()}"}})
    try:
        done = publish(cache, env, since)
    except NotPublished as err:
        log(f"compile-cache: not published: {err}")
        write_status(run_dir, {"publish": {"state": "not published", "why": str(err)}})
        return 0
    except Exception as err:  # noqa: BLE001 - the Hub's refusals, the network, the disk: a line, the pod goes on
        why = safe(f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}", 300,
                   lambda text: redact(text.replace(hf_token(env) or "\0", "<redacted>")))
        log(f"compile-cache: publishing to {cache.where()} failed ({why}); the pod goes on, the next new pod "
            "publishes it")
        write_status(run_dir, {"publish": {"state": "failed", "why": why}})
        return 0
    seconds = time.monotonic() - began
    log(f"compile-cache: published {cache.where()} ({done['files']} files, {done['archive_bytes'] >> 20} MiB "
        f"compressed, {done['triton_folders']} Triton kernel folders, {seconds:.1f} s)")
    write_status(run_dir, {"publish": {"state": "published", "why": f"{done['files']} files, "
                                                                    f"{done['archive_bytes']} bytes compressed",
                                       "seconds": round(seconds, 1), "folders": done["folders"],
                                       "triton_folders": done["triton_folders"]}})
    return 0


def main(argv: list[str]) -> int:
    """python -m entrypoint.launcher.cachepublish SPEC_JSON: {"cache": CompileCache, "health_url", "since", "run_dir", "launcher_pid"}; forks, the parent
    returns at once (the launcher waits for it), the child publishes."""
    from ..logline import logger
    from ..redact import Redactor

    spec = json.loads(argv[0])
    if os.fork():
        return 0
    os.setsid()
    base, redact = logger("prebake"), Redactor(os.environ)  # HF_TOKEN, and HF_ENDPOINT's password if any
    return run(CompileCache.from_json(spec["cache"]), os.environ, spec["health_url"], float(spec["since"]),
               spec.get("run_dir"), lambda text: base(redact(text)), launcher=spec.get("launcher_pid"), redact=redact)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
