"""Triton's kernels in the compile-cache archive (compilecache.py TRITON_FOLDER), with real files in real folders:
the publisher (cachepublish.py) carries what loads a kernel and nothing else, within the restore's bounds; the
restore (cacherestore.py `extract`) puts each kernel where Triton looks, its __grp__ index naming the files where
they landed, keeps a kernel already on the volume, and refuses an archive whose Triton part is anything else.
Triton 3.7.1 itself loading a restored kernel without compiling is checked in the a40 image
(tests/integration/prebuilt/test_triton_cache_image.py)."""

from __future__ import annotations

import io
import json
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest

from entrypoint.launcher import cachepublish
from entrypoint.launcher.cachepublish import NotPublished, build_archive, new_folders
from entrypoint.launcher.cacherestore import Refused, extract
from entrypoint.launcher.compilecache import MANIFEST, CompileCache

KEY = "0123456789abcdef" * 4
KERNEL = "VL7XAOVRQ36YBWLW37DRGJHMTHSC7WRM3SJETSO72YM57DRP7M7Q"  # Triton's folder for a kernel (seen in the image)
TUNED = "ULWMJVI47Z4S6QFZK52REKGQC3GXIHJBGEPSGZM6D6TIBZ3LLNNQ"
PUBLISHER = "/workspace/vllm/torch_compile_cache/triton"  # where the publishing pod's Triton wrote


def cache_at(root: Path) -> CompileCache:
    return CompileCache("me/cc", "dataset", "compile-cache/x.tar.gz", KEY, {}, str(root), False)


def triton_kernel(folder: Path, name: str = "add") -> None:
    """A kernel folder as Triton 3.7.1 writes it (compiler.py `compile`): IR, binary, metadata, and the index."""
    folder.mkdir(parents=True, exist_ok=True)
    children = {}
    for ext in ("source", "ttir", "ttgir", "llir", "ptx", "cubin", "json"):
        (folder / f"{name}.{ext}").write_bytes(b"\x7fELF cubin" if ext == "cubin" else f"{ext} of {name}".encode())
        children[f"{name}.{ext}"] = str(folder / f"{name}.{ext}")
    (folder / f"__grp__{name}.json").write_text(json.dumps({"child_paths": children}))


def archive_of(path: Path, members: dict[str, bytes], key: str = KEY) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {MANIFEST: json.dumps({"key": key}).encode(), **members}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def group(children: dict[str, str]) -> bytes:
    return json.dumps({"child_paths": children}).encode()


def published_kernel(name: str = "add", where: str = PUBLISHER) -> dict[str, bytes]:
    """What the publisher archives of one kernel: its index (naming the publishing pod's paths), metadata, cubin."""
    base = f"torch_compile_cache/triton/{KERNEL}"
    names = [f"{name}.{ext}" for ext in ("source", "ttir", "ttgir", "llir", "ptx", "cubin", "json")]
    return {f"{base}/__grp__{name}.json": group({n: f"{where}/{KERNEL}/{n}" for n in names}),
            f"{base}/{name}.json": b'{"name": "add"}', f"{base}/{name}.cubin": b"\x7fELF cubin"}


def test_the_publisher_carries_what_loads_a_kernel_and_nothing_else(tmp_path):
    root = tmp_path / "vllm"
    triton = root / "torch_compile_cache" / "triton"
    since = time.time() - 1
    triton_kernel(triton / KERNEL)
    (triton / TUNED).mkdir(parents=True)
    (triton / TUNED / "add.autotune.json").write_text('{"configs_timings": []}')
    launcher = triton / ("B" * 52)  # Triton's compiled launcher: native code, rebuilt at start
    launcher.mkdir()
    (launcher / "cuda_utils.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (triton / "tmp.pid_7_0").mkdir()  # a write in progress
    (triton / "tmp.pid_7_0" / "add.cubin").write_bytes(b"half")
    old = triton / ("C" * 52)  # compiled by an earlier start on this volume
    triton_kernel(old, "old")
    for file in old.iterdir():
        os.utime(file, (since - 100, since - 100))

    folders = new_folders(str(root), since)
    assert folders == [f"triton/{TUNED}", f"triton/{KERNEL}"]
    done = build_archive(cache_at(root), folders, str(tmp_path / "out.tar.gz"), None)
    with tarfile.open(tmp_path / "out.tar.gz") as tar:
        names = tar.getnames()
    assert names == [MANIFEST, f"torch_compile_cache/triton/{TUNED}/add.autotune.json",
                     f"torch_compile_cache/triton/{KERNEL}/__grp__add.json",
                     f"torch_compile_cache/triton/{KERNEL}/add.cubin", f"torch_compile_cache/triton/{KERNEL}/add.json"]
    assert done["files"] == 4 and done["triton_folders"] == 2


def test_the_publisher_refuses_an_archive_a_restore_would_refuse(tmp_path, monkeypatch):
    root = tmp_path / "vllm"
    triton_kernel(root / "torch_compile_cache" / "triton" / KERNEL)
    folders = new_folders(str(root), 0)
    monkeypatch.setattr(cachepublish, "MAX_FILES", 3)  # the manifest and 3 files: one member too many
    with pytest.raises(NotPublished, match="over what a restore accepts"):
        build_archive(cache_at(root), folders, str(tmp_path / "out.tar.gz"), None)
    monkeypatch.setattr(cachepublish, "MAX_FILES", 4)
    assert build_archive(cache_at(root), folders, str(tmp_path / "out.tar.gz"), None)["files"] == 3


def test_a_restored_kernel_is_indexed_where_it_landed(tmp_path):
    root = tmp_path / "volume" / "vllm"  # not the publishing pod's /workspace/vllm
    done = extract(archive_of(tmp_path / "a.tar.gz", published_kernel()), cache_at(root), threading.Event())
    folder = root / "torch_compile_cache" / "triton" / KERNEL
    assert sorted(p.name for p in folder.iterdir()) == ["__grp__add.json", "add.cubin", "add.json"]
    # Triton reads the index for the files' paths and ignores a path that does not exist: each names this volume,
    # and only the files the archive carries
    assert json.loads((folder / "__grp__add.json").read_text()) == {
        "child_paths": {"add.cubin": str(folder / "add.cubin"), "add.json": str(folder / "add.json")}}
    assert done["triton_folders"] == 1 and done["folders"] == []


def test_a_kernel_already_on_the_volume_wins(tmp_path):
    root = tmp_path / "vllm"
    mine = root / "torch_compile_cache" / "triton" / KERNEL
    triton_kernel(mine)
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    other = "D" * 52
    members = {**published_kernel(), f"torch_compile_cache/triton/{other}/add.autotune.json": b"{}"}
    done = extract(archive_of(tmp_path / "a.tar.gz", members), cache_at(root), threading.Event())
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == before
    assert done["triton_folders"] == 1 and (mine.parent / other / "add.autotune.json").is_file()


KERNEL_DIR = f"torch_compile_cache/triton/{KERNEL}"
REFUSED = {
    "a shared object": ({f"{KERNEL_DIR}/cuda_utils.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"},
                        "not a Triton kernel's .cubin or .json file"),
    "the IR": ({f"{KERNEL_DIR}/add.ptx": b"ptx"}, "not a Triton kernel's"),
    "a folder that is no kernel key": ({"torch_compile_cache/triton/tmp.pid_1_0/add.cubin": b"x"},
                                       "not a Triton kernel's"),
    "a file beside the kernels": ({"torch_compile_cache/triton/add.cubin": b"x"}, "not a Triton kernel's"),
    "a nested file": ({f"{KERNEL_DIR}/sub/add.cubin": b"x"}, "not a Triton kernel's"),
    "an index naming another folder": ({f"{KERNEL_DIR}/__grp__add.json": group({"../../../evil.json": "/etc/passwd"})},
                                       "names a file outside its folder"),
    "an index that is not Triton's": ({f"{KERNEL_DIR}/__grp__add.json": b"[1, 2]"}, "is not Triton's JSON"),
    "an index nested deep": ({f"{KERNEL_DIR}/__grp__add.json": b"[" * 30000 + b"]" * 30000},
                             "is not Triton's JSON"),
    "an index listing no names": ({f"{KERNEL_DIR}/__grp__add.json": b'{"child_paths": ["add.json"]}'},
                                  "is not Triton's JSON"),
    "an index too large": ({f"{KERNEL_DIR}/__grp__add.json": group({"add.json": "x" * (70 << 10)})},
                           "over 65536"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_triton_part_that_is_no_kernel_is_refused_and_nothing_is_placed(tmp_path, case):
    members, why = REFUSED[case]
    root = tmp_path / "vllm"
    path = archive_of(tmp_path / "a.tar.gz", {**published_kernel(), **members})
    with pytest.raises(Refused, match=why):
        extract(path, cache_at(root), threading.Event())
    assert not (root / "torch_compile_cache").exists() and not list(root.glob(".prebake-*"))


def test_an_index_naming_other_files_names_only_this_kernels(tmp_path):
    """A hostile index that points a kernel's names at other files of the pod: each path is made from the name."""
    root = tmp_path / "vllm"
    members = {**published_kernel(), f"{KERNEL_DIR}/__grp__add.json": group({"add.json": "/etc/passwd",
                                                                              "add.cubin": "/proc/self/environ"})}
    extract(archive_of(tmp_path / "a.tar.gz", members), cache_at(root), threading.Event())
    folder = root / KERNEL_DIR
    assert json.loads((folder / "__grp__add.json").read_text())["child_paths"] == {
        "add.json": str(folder / "add.json"), "add.cubin": str(folder / "add.cubin")}
