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

Restoring (cacherestore.py) never breaks a start: any failure is one line and a cold start. Publishing
(cachepublish.py) runs in its own process once vLLM serves. cachestart.py does both at vLLM's start; this module
imports neither.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from ..contract import hf_token, read_state, write_state
from ..redact import Redactor
from ..vllmoptions import ServeArgs
from .knobs import Settings
from .report import Decision

ARCHIVE_TOP = "torch_compile_cache"  # vLLM's folder under VLLM_CACHE_ROOT, the only one an archive may hold
# Under ARCHIVE_TOP, where the launcher points TRITON_CACHE_DIR (caches.toml), so that the archive carries the Triton
# kernels a start compiled: Inductor's (torch reloads their cubins from there) and vLLM's own (its sampler).
TRITON_FOLDER = "triton"
# Folders under ARCHIVE_TOP that hold one folder per key: published and placed key by key, never whole (the others,
# vLLM's <10 hex> folders and flashinfer_autotune/, are keys themselves).
KEYED_FOLDERS = ("torch_aot_compile", TRITON_FOLDER)
# A Triton 3.7.1 kernel folder: base32 of a sha256 (triton/runtime/cache.py _base32), 52 characters.
TRITON_KEY = re.compile(r"[A-Z2-7]{52}")
# What a Triton kernel needs to load without compiling: its binary, its metadata, the __grp__ index of its files,
# and autotune results (<name>.autotune.json). Its IR (.source, .ttir, .ttgir, .llir, .ptx) is not needed;
# Triton's compiled launcher (cuda_utils*.so) is native code, rebuilt by gcc in under a second, and stays out
# (docs/caches.md).
TRITON_CARRIED = (".cubin", ".json")
MANIFEST = "prebake-compile-cache.json"  # at the archive's root: the key and its facts
STATE_FILE = "compile-cache.json"  # in the run folder: what the status page shows (restore, publish)
# Serve options that place vLLM or name it, and change nothing it compiles (vLLM's ModelConfig ignores
# served_model_name; host and port are the server's, not the engine's).
UNKEYED_OPTIONS = frozenset({"host", "port", "api-key", "disable-access-log-for-endpoints", "served-model-name"})
# vLLM's own envs.compile_factors() ignores these (location-only, ports, logging, credentials, how processes
# start: the launcher's fork and a user's spawn compile the same graphs, and a pod restored with either finds them;
# on an H100 a spawn pod keyed apart from its fork twin started cold, 2026-12-06).
UNKEYED_ENV = {"VLLM_CACHE_ROOT", "VLLM_PORT", "VLLM_API_KEY", "VLLM_CONFIG_ROOT", "VLLM_SERVER_DEV_MODE",
               "VLLM_HOST_IP", "VLLM_LOGGING_LEVEL", "VLLM_LOGGING_PREFIX", "VLLM_LOGGING_STREAM",
               "VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK", "VLLM_USAGE_STATS_SERVER", "VLLM_RPC_BASE_PATH",
               "VLLM_ENABLE_STARTUP_PLAN", "VLLM_DP_MASTER_IP", "VLLM_DP_MASTER_PORT",
               "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "VLLM_WORKER_MULTIPROC_METHOD", "VLLM_ENABLE_V1_MULTIPROCESSING"}
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


def triton_path_ok(parts: list[str], folder: bool) -> bool:
    """A path under ARCHIVE_TOP/TRITON_FOLDER (its parts, TRITON_FOLDER first) that an archive may hold: that
    folder, a kernel's folder, or one of a kernel's carried files."""
    if len(parts) < 2:
        return folder and parts == [TRITON_FOLDER]
    if not TRITON_KEY.fullmatch(parts[1]):
        return False
    return len(parts) == 2 if folder else len(parts) == 3 and parts[2].endswith(TRITON_CARRIED)


def triton_note(vllm_env: Mapping[str, str], cache_root: str) -> str:
    """What the decision says of Triton's kernels: the archive carries them only when TRITON_CACHE_DIR is
    ARCHIVE_TOP/TRITON_FOLDER under VLLM_CACHE_ROOT, as the launcher sets it (caches.toml)."""
    inside = os.path.join(cache_root, ARCHIVE_TOP, TRITON_FOLDER)
    where = vllm_env.get("TRITON_CACHE_DIR")
    if where and os.path.normpath(os.path.expanduser(where)) == os.path.normpath(inside):
        return "with Triton's kernels (TRITON_CACHE_DIR inside it)"
    why = f"TRITON_CACHE_DIR is {where}" if where else "TRITON_CACHE_DIR is unset"
    return f"without Triton's kernels ({why}, not {inside}: a restored start compiles them again)"


def split_repo(value: str) -> tuple[str, str]:
    for prefix, kind in REPO_TYPES.items():
        if value.startswith(prefix):
            return kind, value[len(prefix):]
    return "dataset", value


def keyed_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """vLLM's serve options in one spelling (vllmoptions: --max_model_len=8192 and --max-model-len 8192 give one
    key), without those that change nothing it compiles (UNKEYED_OPTIONS, the served names)."""
    return ServeArgs.of(argv).canonical(leave_out=UNKEYED_OPTIONS)


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
    # what is shown (--dry-run, the status page) and published (the archive's manifest): no secret's value
    redact = Redactor({**env, **vllm_env})
    facts = {**facts, "argv": redact.argv(facts["argv"]), "env": {k: redact(v) for k, v in facts["env"].items()}}
    model = str(argv[2]) if len(argv) > 2 else "model"
    path = (f"compile-cache/vllm-{_slug(str(facts['vllm']))}/{_slug(gpu_names[0] if gpu_names else 'gpu')}/"
            f"{_slug(model.replace('/', '--'))}-{key[:16]}.tar.gz")
    token = hf_token(env)
    cache = CompileCache(repo_id, kind, path, key, facts, vllm_cache_root(vllm_env), bool(token))
    then = ("published once vLLM first serves, in the background" if token else
            "not published (HF_TOKEN unset: restore only)")
    triton = triton_note(vllm_env, cache.vllm_cache_root)
    return cache, Decision("compile-cache", f"restore {cache.where()} into {cache.vllm_cache_root} before vLLM "
                                            f"starts, {triton}; when the repository lacks it, {then}",
                           f"VL_CACHE_REPO from {settings.source('VL_CACHE_REPO')}; key {key[:16]}: vLLM {facts['vllm']}, "
                           f"torch {facts['torch']}, {len(gpu_names)}x {gpu_names[0] if gpu_names else '?'}, vLLM's "
                           "options and VLLM_* environment; vLLM checks its own hash of what is restored")


def write_status(run_dir: str | None, changes: dict, log: Callable[[str], None] | None = None) -> None:
    """compile-cache.json in the run folder (status page): {"restore": ..., "publish": ...}, merged."""
    if not run_dir:
        return
    path = os.path.join(run_dir, STATE_FILE)
    try:
        state = read_state(path, "compile_cache_status")
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
