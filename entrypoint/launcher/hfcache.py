"""Is a repository complete in the local Hugging Face cache? (decides HF_HUB_OFFLINE)

The common case on a fresh pod is "not cached": that answer comes from one stat of the
repo's cache folder, without importing huggingface_hub (~200 ms). Only when the folder
exists does huggingface_hub's cache API check that the snapshot of `main` holds the
config and every weight shard: a download cut in the middle leaves the folder, and
going offline then would stop vLLM on a missing file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from ..untrusted import KINDS, SetAside, parse_json, read_bytes


@dataclass(frozen=True)
class CacheCheck:
    repo: str
    complete: bool
    detail: str


def hub_cache_dir(env: Mapping[str, str]) -> str:
    """The same folder huggingface_hub uses: HF_HUB_CACHE, else $HF_HOME/hub."""
    explicit = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return os.path.expanduser(explicit)
    home = env.get("HF_HOME")
    if not home:
        xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def _repo_folder(cache_dir: str, repo: str) -> str:
    return os.path.join(cache_dir, "models--" + repo.replace("/", "--"))


def _shard_name(value: object) -> str | None:
    """A weight_map value as a safe relative file name, or None: "../x", "/etc/passwd" or a
    non-string would make the check look outside the snapshot (or fail on it)."""
    if not isinstance(value, str) or not value or "\\" in value or "\x00" in value:
        return None
    parts = value.split("/")
    if value.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return None
    return value


def _index_shards(path: str, folder: str) -> tuple[list[str] | None, str]:
    """The shard files an index names, or None and what is wrong with it. The Hub's cache links each snapshot's
    file to its blob: followed only within the repository's own folder, then read as untrusted (untrusted.py)."""
    spec = KINDS["hf_index"]
    real = os.path.realpath(path)
    if not real.startswith(os.path.realpath(folder) + os.sep):
        return None, f"links outside {folder}"
    try:
        data = parse_json(read_bytes(real, spec.max_bytes), spec)
    except SetAside as err:
        return None, f"is set aside: {err}"
    except OSError as err:
        return None, f"is unreadable ({err.strerror or type(err).__name__})"
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict):
        return None, "has no weight_map object"
    if not weight_map:
        return None, "has an empty weight_map"  # not "all 0 shards cached": it names no weights
    shards = [_shard_name(value) for value in weight_map.values()]
    if None in shards:
        bad = next(value for value in weight_map.values() if _shard_name(value) is None)
        return None, f"names {bad!r}, not a file of the repository"
    return sorted(set(shards)), ""


def check_repo(repo: str, cache_dir: str, weights: bool = True) -> CacheCheck:
    """`weights=False` is for tokenizer-only repositories."""
    folder = _repo_folder(cache_dir, repo)
    if not os.path.isdir(folder):
        return CacheCheck(repo, False, "not in the cache")
    try:
        return _check_cached(repo, cache_dir, folder, weights)
    except (OSError, ValueError) as err:
        # The cache lives on the volume and outlives the image: whatever is broken there must not
        # stop the pod at every start (refs/main not UTF-8, snapshots/ a file, ...).
        return CacheCheck(repo, False, f"cache folder unreadable ({type(err).__name__}: {err}); delete {folder} "
                                       "to download it again")


def _check_cached(repo: str, cache_dir: str, folder: str, weights: bool) -> CacheCheck:
    from huggingface_hub import try_to_load_from_cache  # lazy: heavy import, only when needed

    def cached(filename: str) -> str | None:
        found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir)
        return found if isinstance(found, str) else None

    if not weights:
        ok = cached("tokenizer_config.json") is not None
        return CacheCheck(repo, ok, "tokenizer cached" if ok else "tokenizer_config.json missing")
    if cached("config.json") is None:
        return CacheCheck(repo, False, "config.json missing from the snapshot of main")
    index = cached("model.safetensors.index.json")
    if index is None:
        ok = cached("model.safetensors") is not None
        return CacheCheck(repo, ok, "single weight file cached" if ok else "no safetensors weights cached")
    shards, problem = _index_shards(index, folder)
    if shards is None:
        # vLLM reads this same file and would fail on it, online or not (the Hub client keeps a
        # cached file whose blob name matches): say which folder to delete.
        return CacheCheck(repo, False, f"{index} (model.safetensors.index.json) is corrupt: it {problem}; vLLM "
                                       f"will fail on it too: delete {folder} to download it again")
    missing = [shard for shard in shards if cached(shard) is None]
    if missing:
        return CacheCheck(repo, False, f"{len(missing)} of {len(shards)} weight shards missing (e.g. {missing[0]})")
    return CacheCheck(repo, True, f"all {len(shards)} weight shards cached")
