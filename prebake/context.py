"""Build contexts as in-memory tar archives with fixed metadata.

Fixed owners, modes and times mean the same files give the same archive on any machine,
so Docker's COPY cache depends on content alone.
"""

import io
import tarfile
from pathlib import Path
from typing import Mapping

from prebake.variants import REPO_ROOT

ENTRYPOINT_DIR = REPO_ROOT / "entrypoint"
IMAGE_FILES_DIR = REPO_ROOT / "templates" / "files"
SLIM_VENV = IMAGE_FILES_DIR / "slim-venv.sh"  # run by the stack's install step
FLASHINFER_AOT = IMAGE_FILES_DIR / "flashinfer_aot.py"  # run by the kernels image's steps
_SKIPPED = {"__pycache__", ".pytest_cache", ".mypy_cache"}


def _add(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def tree(source: Path, prefix: str) -> dict[str, bytes | None]:
    """The files under `source` as archive entries below `prefix` (caches left out)."""
    entries: dict[str, bytes | None] = {prefix: None}
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if _SKIPPED.intersection(relative.parts) or path.suffix == ".pyc":
            continue
        name = f"{prefix}/{relative.as_posix()}"
        entries[name] = None if path.is_dir() else path.read_bytes()
    return entries


def archive(entries: Mapping[str, bytes | None]) -> bytes:
    """A tar of `entries` (name -> content, None for a folder), sorted by name."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries):
            data = entries[name]
            _add(tar, name, data, 0o755 if data is None else 0o644)
    return buffer.getvalue()


def stack_context(dockerfile: str, layer_files: tuple[tuple[str, str], ...], extra_ca: bytes) -> bytes:
    """The stack's context: its Dockerfile, the lock split into one requirements file per install
    layer (render.python_layers), slim-venv.sh and the extra CA."""
    entries: dict[str, bytes | None] = {"Dockerfile": dockerfile.encode(), "requirements": None, "build-ca": None,
                                        "slim-venv.sh": SLIM_VENV.read_bytes()}
    entries.update({f"requirements/{name}": text.encode() for name, text in layer_files})
    if extra_ca:
        entries["build-ca/prebake-extra-ca.crt"] = extra_ca
    return archive(entries)


def kernels_context(dockerfile: str) -> bytes:
    return archive({"Dockerfile": dockerfile.encode(), "flashinfer_aot.py": FLASHINFER_AOT.read_bytes()})


def variant_context(dockerfile: str) -> bytes:
    entries: dict[str, bytes | None] = {"Dockerfile": dockerfile.encode()}
    entries.update(tree(IMAGE_FILES_DIR, "files"))
    entries.update(tree(ENTRYPOINT_DIR, "entrypoint"))
    return archive(entries)
