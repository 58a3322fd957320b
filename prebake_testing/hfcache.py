"""A Hugging Face cache on disk as huggingface_hub lays it out, for the launcher's HF_HUB_OFFLINE decision."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ORNITH = "ulkaa/Ornith-1.5-35B-A3B-AWQ-INT4"  # ornith of entrypoint/models.toml, the model of hosts.write_marker
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cache_repo(hub: Path, repo: str, files: dict[str, str]) -> None:
    """The layout huggingface_hub writes: blobs by hash, snapshots/<commit>/ as symlinks, refs/main."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(COMMIT)
    (folder / "blobs").mkdir(exist_ok=True)
    for name, content in files.items():
        blob = folder / "blobs" / hashlib.sha256(content.encode()).hexdigest()
        blob.write_text(content)
        link = folder / "snapshots" / COMMIT / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../..") / "blobs" / blob.name)


def sharded_weights(shards: int) -> dict[str, str]:
    """The files of a repository with `shards` safetensors shards and their index."""
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index = {"metadata": {}, "weight_map": {f"layer.{i}.weight": n for i, n in enumerate(names)}}
    return {"config.json": "{}", "model.safetensors.index.json": json.dumps(index),
            **{n: f"weights {n}" for n in names}}
