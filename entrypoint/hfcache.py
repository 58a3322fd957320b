"""Is a repository complete in the local Hugging Face cache? (decides HF_HUB_OFFLINE)

The common case on a fresh pod is "not cached": that answer comes from one stat of the
repo's cache folder, without importing huggingface_hub (~200 ms). Only when the folder
exists does huggingface_hub's cache API check that the snapshot of `main` holds the
config and every weight shard: a download cut in the middle leaves the folder, and
going offline then would stop vLLM on a missing file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Mapping


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


def check_repo(repo: str, cache_dir: str, weights: bool = True) -> CacheCheck:
    """`weights=False` is for tokenizer-only repositories."""
    if not os.path.isdir(_repo_folder(cache_dir, repo)):
        return CacheCheck(repo, False, "not in the cache")
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
    try:
        with open(index, encoding="utf-8") as handle:
            shards = sorted(set(json.load(handle)["weight_map"].values()))
    except (OSError, ValueError, KeyError, AttributeError):
        return CacheCheck(repo, False, "model.safetensors.index.json unreadable")
    missing = [shard for shard in shards if cached(shard) is None]
    if missing:
        return CacheCheck(repo, False, f"{len(missing)} of {len(shards)} weight shards missing (e.g. {missing[0]})")
    return CacheCheck(repo, True, f"all {len(shards)} weight shards cached")
