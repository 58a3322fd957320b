"""vLLM's compile cache shared across pods through a Hugging Face repository (VL_CACHE_REPO; docs/caches.md).

What vLLM 0.27.1 hashes (vllm/compilation/backends.py `VllmBackend.__call__`, decorators.py, caching.py
`aot_compile_hash_factors`): the VLLM_* environment (envs.compile_factors, minus a list of location-only
variables), `VllmConfig.compute_hash()` (vLLM's version, and the model, cache, parallel, scheduler, device,
load and compilation configs: what the serve options set), the compiler's factors (Inductor's system: GPU
name, CUDA and Triton versions, torch's key) and the source of the files Dynamo traced. It writes under
`$VLLM_CACHE_ROOT/torch_compile_cache/<10 hex>/rank_<i>_<j>/...` and, with AOT compile (the default on torch
>= 2.10), `torch_compile_cache/torch_aot_compile/<64 hex>/{inductor_cache,rank_<i>_<j>/model}`.

That hash needs vLLM's VllmConfig, which only exists inside vLLM (built from the model's Hugging Face config);
the launcher cannot compute it before vLLM starts. So the launcher keys the archive by what it knows and vLLM
hashes (the key below: the image's vLLM, torch and CUDA, the GPU's name and count, vLLM's serve options minus
those that only place it, its VLLM_* environment), restores the directories vLLM wrote under its own hash
names, and lets vLLM check its own hash: a restored directory whose hash is not the one vLLM computes is
never read (vLLM compiles into a new one beside it). A key broader than vLLM's costs a miss, never a wrong
cache.

Restoring never breaks a start: any failure (no repository, no network, 404, an archive that is corrupt,
truncated, foreign or hostile) is one line and a cold start. The archive is read twice: first every member
checked (regular files and folders only, under torch_compile_cache/, no absolute path or `..`, at most
MAX_FILES files and MAX_UNPACKED bytes), then extracted into a staging folder on the same volume and moved
into place, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..contract import hf_token
from .knobs import Settings
from .report import Decision

ARCHIVE_TOP = "torch_compile_cache"  # vLLM's folder under VLLM_CACHE_ROOT, the only one an archive may hold
MANIFEST = "prebake-compile-cache.json"  # at the archive's root: the key and its facts
STATE_FILE = "compile-cache.json"  # in the run folder: what the status page shows (restore, publish)
MAX_ARCHIVE = 8 << 30  # bytes downloaded, at most
MAX_UNPACKED = 32 << 30  # bytes the members declare, at most (a size bomb is refused before a byte is written)
MAX_FILES = 200_000
RESTORE_TIMEOUT_S = 300.0  # download and extraction; past it the start goes on cold
# Serve options that place vLLM or name it, and change nothing it compiles (vLLM's ModelConfig ignores
# served_model_name; host and port are the server's, not the engine's).
UNKEYED_OPTIONS = {"--host": 1, "--port": 1, "--api-key": 1, "--disable-access-log-for-endpoints": 1}
# vLLM's own envs.compile_factors() ignores these (location-only, ports, logging, credentials).
UNKEYED_ENV = {"VLLM_CACHE_ROOT", "VLLM_PORT", "VLLM_API_KEY", "VLLM_CONFIG_ROOT", "VLLM_SERVER_DEV_MODE",
               "VLLM_HOST_IP", "VLLM_LOGGING_LEVEL", "VLLM_LOGGING_PREFIX", "VLLM_LOGGING_STREAM",
               "VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK", "VLLM_USAGE_STATS_SERVER", "VLLM_RPC_BASE_PATH",
               "VLLM_ENABLE_STARTUP_PLAN", "VLLM_DP_MASTER_IP", "VLLM_DP_MASTER_PORT"}
REPO_TYPES = {"datasets/": "dataset", "models/": "model"}


@dataclass(frozen=True)
class CompileCache:
    repo_id: str
    repo_type: str  # "dataset" (a bare owner/name, as the script had it) or "model"
    path_in_repo: str  # compile-cache/vllm-<version>/<gpu>/<model>-<key>.tar.gz
    key: str  # sha256 of `facts`, 64 hex
    facts: Mapping[str, object]
    vllm_cache_root: str  # VLLM_CACHE_ROOT as vLLM will read it
    publish: bool  # HF_TOKEN is set: a cold start is published once vLLM serves (HF_ENDPOINT: read from the environment)

    def where(self) -> str:
        kind = "datasets/" if self.repo_type == "dataset" else ""
        return f"{kind}{self.repo_id}:{self.path_in_repo}"

    def as_json(self) -> dict:
        return {"repo_id": self.repo_id, "repo_type": self.repo_type, "path_in_repo": self.path_in_repo,
                "key": self.key, "facts": dict(self.facts), "vllm_cache_root": self.vllm_cache_root,
                "publish": self.publish}

    @classmethod
    def from_json(cls, data: Mapping) -> "CompileCache":
        return cls(data["repo_id"], data["repo_type"], data["path_in_repo"], data["key"], dict(data["facts"]),
                   data["vllm_cache_root"], bool(data["publish"]))


def split_repo(value: str) -> tuple[str, str]:
    for prefix, kind in REPO_TYPES.items():
        if value.startswith(prefix):
            return kind, value[len(prefix):]
    return "dataset", value


def keyed_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """vLLM's serve options without those that change nothing it compiles (UNKEYED_OPTIONS, the served names)."""
    kept, skip, names = [], 0, False
    for token in argv:
        if skip:
            skip -= 1
            continue
        if names and not token.startswith("--"):
            continue  # a served name
        names = False
        option = token.split("=", 1)[0]
        if option == "--served-model-name":
            names = "=" not in token
            continue
        if option in UNKEYED_OPTIONS:
            skip = 0 if "=" in token else UNKEYED_OPTIONS[option]
            continue
        kept.append(token)
    return kept


def vllm_cache_root(environment: Mapping[str, str]) -> str:
    """VLLM_CACHE_ROOT as vLLM 0.27.1's envs.py reads it: the variable, else $XDG_CACHE_HOME/vllm, ~/.cache/vllm."""
    if environment.get("VLLM_CACHE_ROOT"):
        return os.path.expanduser(environment["VLLM_CACHE_ROOT"])
    base = environment.get("XDG_CACHE_HOME") or os.path.join(environment.get("HOME") or os.path.expanduser("~"),
                                                               ".cache")
    return os.path.join(base, "vllm")


def key_facts(identity: Mapping[str, str], gpu_names: list[str], argv, environment: Mapping[str, str]) -> dict:
    return {"vllm": identity.get("vllm", "?"), "torch": identity.get("torch", "?"), "cuda": identity.get("cuda", "?"),
            "gpus": gpu_names, "argv": keyed_argv(list(argv)[1:]),
            "env": {k: v for k, v in sorted(environment.items()) if k.startswith("VLLM_") and k not in UNKEYED_ENV}}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "x"


def decide_compile_cache(settings: Settings, env: Mapping[str, str], identity: Mapping[str, str],
                         gpu_names: list[str], argv, vllm_env: Mapping[str, str]) -> tuple[CompileCache | None, Decision]:
    """vllm_env: the environment vLLM will get; gpu_names: the GPUs it uses."""
    repo = settings.value("VL_CACHE_REPO")
    if not repo:
        return None, Decision("compile-cache", "off: a new pod compiles from nothing (minutes)",
                              "VL_CACHE_REPO unset; set it to a Hugging Face repository to share vLLM's compile "
                              "cache across pods")
    kind, repo_id = split_repo(repo)
    facts = key_facts(identity, gpu_names, argv, vllm_env)
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()
    model = str(argv[2]) if len(argv) > 2 else "model"
    path = (f"compile-cache/vllm-{_slug(str(facts['vllm']))}/{_slug(gpu_names[0] if gpu_names else 'gpu')}/"
            f"{_slug(model.replace('/', '--'))}-{key[:16]}.tar.gz")
    token = hf_token(env)
    cache = CompileCache(repo_id, kind, path, key, facts, vllm_cache_root(vllm_env), bool(token))
    then = ("published once vLLM first serves, in the background" if token else
            "not published (HF_TOKEN unset: restore only)")
    return cache, Decision("compile-cache", f"restore {cache.where()} into {cache.vllm_cache_root} before vLLM "
                                            f"starts; when the repository lacks it, {then}",
                           f"VL_CACHE_REPO from {settings.source('VL_CACHE_REPO')}; key {key[:16]}: vLLM {facts['vllm']}, "
                           f"torch {facts['torch']}, {len(gpu_names)}x {gpu_names[0] if gpu_names else '?'}, vLLM's "
                           "options and VLLM_* environment; vLLM checks its own hash of what is restored")


# --- restore (before vLLM starts) --------------------------------------------------------------------------------

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


def write_status(run_dir: str | None, changes: dict, log: Callable[[str], None] | None = None) -> None:
    """compile-cache.json in the run folder (status page): {"restore": ..., "publish": ...}, merged."""
    if not run_dir:
        return
    from ..contract import read_state, write_state

    path = os.path.join(run_dir, STATE_FILE)
    try:
        state = read_state(path)
        state.update(changes)
        write_state(path, state)
    except OSError as err:
        if log:
            log(f"compile-cache: cannot write {path} ({err.strerror or err})")


def with_compile_cache(plan, settings: Settings, env: Mapping[str, str], identity: Mapping[str, str], gpu_names):
    """The plan with its compile-cache decision (and CompileCache, when VL_CACHE_REPO is set)."""
    import dataclasses

    cache, decision = decide_compile_cache(settings, env, identity, list(gpu_names), plan.argv, plan.environment(env))
    return dataclasses.replace(plan, decisions=(*plan.decisions, decision), compile_cache=cache)


PUBLISH_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "publish_cache.py")


def start_of_vllm(plan, env: Mapping[str, str], log: Callable[[str], None], python: str,
                  stopped: Callable[[], bool] = lambda: False):
    """Before vLLM starts (not in a dry run): restore, start the publisher when the repository lacks the archive,
    and return the plan with the outcome as a decision (also added to state.json's, the status page's).
    Never raises."""
    import dataclasses
    import subprocess

    cache = plan.compile_cache
    since = time.time()
    run_dir = plan.observe.run_dir if plan.observe else None
    write_status(run_dir, {"where": cache.where(), "restore": {"state": "restoring", "why": "downloading"},
                           "publish": {"state": "not yet", "why": "after the restore"}}, log)
    outcome = restore(cache, env, stopped=stopped)
    line = describe(outcome, cache)
    log(f"compile-cache: {line}")
    write_status(run_dir, {"restore": outcome.as_json(), "where": cache.where(),
                           "publish": {"state": "waiting for vLLM's first healthy start" if outcome.publish else
                                       "not published", "why": "the repository lacks it" if outcome.publish else
                                       outcome.why if outcome.state == "cold" else "restored"}}, log)
    if outcome.publish:
        bridge = plan.bridge
        health = (bridge.upstream if bridge.mode == "keepalive" else f"http://127.0.0.1:{bridge.vllm_port}") + "/health"
        spec = {"cache": cache.as_json(), "health_url": health, "since": since - 1, "run_dir": run_dir,
                "launcher_pid": os.getpid()}
        try:  # it forks and its parent returns at once: the publisher is tini's child, not vLLM's
            subprocess.run([python, PUBLISH_SCRIPT, json.dumps(spec)], env=dict(env), timeout=30, check=True)
        except (OSError, subprocess.SubprocessError) as err:
            log(f"compile-cache: the publisher did not start ({err}); this start is not published")
    decision = Decision("compile-cache", line, "VL_CACHE_REPO; vLLM checks its own hash of what was restored")
    if plan.observe:  # the launcher is state.json's one writer; the bridge only reads it
        from ..contract import read_state, write_state

        try:
            state = read_state(plan.observe.state_file)
            if state:
                state["decisions"] = [*state.get("decisions", []), decision.as_json()]
                write_state(plan.observe.state_file, state)
        except OSError:
            pass
    return dataclasses.replace(plan, decisions=(*plan.decisions, decision))
