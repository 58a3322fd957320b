"""The compile-cache restore bounds an archive before it reads it (issue 47): the real restore
(launcher/cacherestore.py `restore`) runs in a subprocess of its own against the stand-in Hub, and reports its peak
memory (ru_maxrss) before and after; small archives that claim huge headers, names or member counts cost it no
more than a fixed bound and end in one short cold-start reason. Archives made by hand, header by header, try the
reader's edges: PAX sizes, base-256 numbers, bad checksums, truncation, long names across blocks."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from prebake_testing.hub import Hub

REPO = "me/compile-cache"
PATH = "compile-cache/vllm-0.27.1/NVIDIA_H200/model-0123456789abcdef.tar.gz"
KEY = "0123456789abcdef" * 4
MANIFEST = "prebake-compile-cache.json"
TOP = "torch_compile_cache/torch_aot_compile/" + "a" * 64
GROWTH_BOUND_KIB = 64 << 10  # the restore's peak memory over its baseline, at most
SHORT = 300  # characters of a reason, at most
REPO_ROOT = Path(__file__).resolve().parent.parent.parent

# VmHWM, this process's peak resident memory (ru_maxrss would carry the parent's peak across fork and exec)
RESTORE = """
import json, sys
from entrypoint.launcher.cacherestore import restore
from entrypoint.launcher.compilecache import CompileCache
import huggingface_hub  # noqa: F401 - in the baseline, as in the launcher
def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
spec = json.loads(sys.argv[1])
cache = CompileCache(spec["repo"], "dataset", spec["path"], spec["key"], {}, spec["root"], False)
before = peak_kib()
outcome = restore(cache, spec["env"])
after = peak_kib()
print(json.dumps({"before_kib": before, "after_kib": after, "outcome": outcome.as_json()}))
"""


@pytest.fixture(scope="module")
def hub():
    server = Hub()
    server.create(REPO)
    yield server
    server.stop()


def run_restore(hub: Hub, archive: bytes, root: Path) -> dict:
    """The real restore of `archive` in a fresh Python; its peak memory before and after, and its outcome."""
    hub.put(REPO, PATH, archive)
    spec = {"repo": REPO, "path": PATH, "key": KEY, "root": str(root / "vllm"),
            "env": {"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}}
    env = {**os.environ, "HF_HOME": str(root / "hf"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", RESTORE, json.dumps(spec)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


# --- archives, block by block -----------------------------------------------------------------------------------

def header(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, raw_size: bytes | None = None,
           checksum_off: int = 0, **fields) -> bytes:
    """One ustar header block, its checksum right (or off by checksum_off); raw_size: the size field as given."""
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, 0o644, 1_700_000_000
    for field, value in fields.items():
        setattr(info, field, value)
    block = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT)[-512:] if len(name) <= 100 else
                      info.tobuf(format=tarfile.USTAR_FORMAT))
    if raw_size is not None:
        block[124:136] = raw_size.ljust(12, b"\0")
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % (sum(block[:512]) + checksum_off)
    return bytes(block)


def data(payload: bytes) -> bytes:
    return payload + b"\0" * (-len(payload) % 512)


def member(name: str, payload: bytes = b"x", kind: bytes = tarfile.REGTYPE, **fields) -> bytes:
    return header(name, len(payload) if kind == tarfile.REGTYPE else 0, kind, **fields) + \
        (data(payload) if kind == tarfile.REGTYPE else b"")


def manifest(key: str = KEY) -> bytes:
    return member(MANIFEST, json.dumps({"key": key}).encode())


def pax(records: dict[str, str], kind: bytes = tarfile.XHDTYPE) -> bytes:
    body = b""
    for key, value in records.items():
        line = f" {key}={value}\n".encode()
        length = len(line) + 1
        while len(str(length)) + len(line) != length:  # the length counts its own digits
            length = len(str(length)) + len(line)
        body += str(length).encode() + line
    return header("././@PaxHeader", len(body), kind) + data(body)


def gnu_long(name: bytes, kind: bytes = tarfile.GNUTYPE_LONGNAME) -> bytes:
    return header("././@LongLink", len(name) + 1, kind) + data(name + b"\0")


def end() -> bytes:
    return b"\0" * 1024


def gz(*parts: bytes) -> bytes:
    return gzip.compress(b"".join(parts), compresslevel=6)


def gz_stream(pieces) -> bytes:
    """gzip of a long stream of pieces, without holding it whole."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as archive:
        for piece in pieces:
            archive.write(piece)
    return out.getvalue()


def huge_gnu_name(size: int):
    yield manifest()
    yield header("././@LongLink", size, tarfile.GNUTYPE_LONGNAME)
    chunk = b"a" * (1 << 20)
    for _ in range(size >> 20):
        yield chunk
    yield b"\0" * (-size % 512) + member(TOP + "/rank_0_0/model") + end()


def many(count: int, block: bytes, first: bytes = b""):
    yield first
    for _ in range(count):
        yield block
    yield end()


# --- the archives: memory and the line -------------------------------------------------------------------

def assert_bounded_cold(result: dict, why: str) -> None:
    outcome = result["outcome"]
    grew = result["after_kib"] - result["before_kib"]
    print(f"peak {result['after_kib'] >> 10} MiB, baseline {result['before_kib'] >> 10} MiB, grew {grew} KiB: "
          f"{outcome['why'][:300]}")
    assert grew < GROWTH_BOUND_KIB, f"the restore grew by {grew >> 10} MiB"
    assert len(outcome["why"]) < SHORT, len(outcome["why"])
    assert outcome["state"] == "cold", outcome
    assert why in outcome["why"], outcome


def test_a_128_mib_member_name_is_refused_before_it_is_read(tmp_path, hub):
    archive = gz_stream(huge_gnu_name(128 << 20))
    assert len(archive) < 200 << 10  # the 127 KiB
    assert_bounded_cold(run_restore(hub, archive, tmp_path), "a member's name is 134217728 bytes long, over 4096")


def test_a_pax_header_of_a_megabyte_is_refused_before_it_is_read(tmp_path, hub):
    archive = gz(manifest(), pax({"path": TOP + "/" + "n" * (1 << 20)}), member("x"), end())
    assert_bounded_cold(run_restore(hub, archive, tmp_path), "an extended header (x) declares")


def test_400000_members_named_like_the_manifest_count(tmp_path, hub):
    archive = gz_stream(many(400_000, manifest()))
    assert_bounded_cold(run_restore(hub, archive, tmp_path), "a second manifest")


def test_300000_members_are_refused_at_the_limit(tmp_path, hub):
    archive = gz_stream(many(300_000, member("torch_compile_cache/", kind=tarfile.DIRTYPE), manifest()))
    result = run_restore(hub, archive, tmp_path)
    assert_bounded_cold(result, "more than 200000 members")
    assert not (tmp_path / "vllm" / "torch_compile_cache").exists()


def test_a_one_mib_name_never_reaches_the_line(tmp_path, hub):
    """The issue's third: a long name refused for what it says is shown cut and escaped, never whole."""
    name = "evil/\x1b]0;owned\x07" + "n" * 4000
    archive = gz(manifest(), pax({"path": name}), member("x"), end())
    outcome = run_restore(hub, archive, tmp_path)["outcome"]
    assert "holds a control character ('evil/\\x1b]0;owned\\x07nnn" in outcome["why"], outcome
    assert len(outcome["why"]) < SHORT and "\x1b" not in outcome["why"] and "(4015 characters)" in outcome["why"]


# --- every edge of the reader: refused, or read right -------------------------------------------------------------

EDGES = {
    "a PAX size of 10**19": (lambda: gz(manifest(), pax({"size": "1" + "0" * 19}), member(TOP + "/m"), end()),
                             "size bomb"),
    "a PAX size that is not a number": (lambda: gz(manifest(), pax({"size": "12x"}), member(TOP + "/m"), end()),
                                        "not a number"),
    "a base-256 size of 2**80": (lambda: gz(manifest(), header(TOP + "/m", raw_size=b"\x80" + (1 << 80).to_bytes(11, "big")),
                                            end()), "size bomb"),
    "a negative base-256 size": (lambda: gz(manifest(), header(TOP + "/m", raw_size=b"\xff" * 12), end()),
                                 "negative"),
    "a bad checksum": (lambda: gz(manifest(), header(TOP + "/m", 1, checksum_off=1) + data(b"x"), end()), "checksum"),
    "a truncated header": (lambda: gz(manifest(), header(TOP + "/m", 1)[:300]), "truncated"),
    "truncated data": (lambda: gz(manifest(), header(TOP + "/m", 5000) + b"x" * 1000), "truncated"),
    "an extended header and nothing after": (lambda: gz(manifest(), pax({"path": TOP + "/m"})), "truncated"),
    "a chain of extended headers": (lambda: gz(manifest(), *[pax({"path": TOP + "/m"})] * 5, member("x"), end()),
                                    "more than 4 extended headers"),
    "a global PAX header over 64 KiB": (lambda: gz(manifest(), pax({"comment": "c" * 70_000}, tarfile.XGLTYPE),
                                                   member(TOP + "/m"), end()), "declares 700"),
    "a GNU long name of 4097 bytes": (lambda: gz(manifest(), gnu_long(b"n" * 4097), member("x"), end()),
                                      "over 4096"),
    "a long name that is not UTF-8": (lambda: gz(manifest(), gnu_long(TOP.encode() + b"/\xff\xfe"), member("x"), end()),
                                      "not UTF-8"),
    "a PAX sparse member": (lambda: gz(manifest(), pax({"GNU.sparse.size": str(31 << 30)}), member(TOP + "/m"), end()),
                            "sparse"),
    "an old GNU sparse member": (lambda: gz(manifest(), header(TOP + "/s", 0, tarfile.GNUTYPE_SPARSE), end()), "sparse"),
    "a link, then a file written through it": (
        lambda: gz(manifest(), member(TOP + "/l", kind=tarfile.SYMTYPE, linkname="/tmp"), member(TOP + "/l/evil"), end()),
        "holds a link"),
    "a FIFO": (lambda: gz(manifest(), member(TOP + "/f", kind=tarfile.FIFOTYPE), end()), "special file"),
    "a name with a control character": (lambda: gz(manifest(), member(TOP + "/a\rb")), "control character"),
    "a member twice": (lambda: gz(manifest(), member(TOP + "/m"), member(TOP + "/m"), end()), "there twice"),
    "the manifest not first": (lambda: gz(member(TOP + "/m"), manifest(), end()), "does not begin with"),
    "a manifest of 2 MiB": (lambda: gz(member(MANIFEST, b" " * (2 << 20)), end()), "over 1048576"),
    "a ustar prefix with ..": (lambda: gz(manifest(), member("torch_compile_cache/" + "p" * 60 + "/../../../" + "q" * 90), end()),
                               "leaves the cache folder"),
    "not gzip, not tar": (lambda: b"<html>" + b"x" * 600, "corrupt or truncated"),
    "a PAX record whose length lies": (lambda: gz(manifest(), header("././@PaxHeader", 30, tarfile.XHDTYPE)
                                                  + data(b"99999999 path=aaaaaaaaaaaaaaa\n"), member("x"), end()),
                                       "malformed"),
    "a file where a folder must be": (lambda: gz(manifest(), member(TOP), member(TOP + "/m"), end()), "there twice"),
    "a volume header": (lambda: gz(manifest(), header(TOP + "/v", 5, b"V") + data(b"vvvvv"), end()), "special file"),
}


@pytest.mark.parametrize("case", sorted(EDGES))
def test_each_edge_is_a_short_cold_start(tmp_path, hub, case):
    make, why = EDGES[case]
    result = run_restore(hub, make(), tmp_path)
    assert_bounded_cold(result, why)
    cache = tmp_path / "vllm" / "torch_compile_cache"
    assert not cache.exists() or not any(cache.rglob("*")), list(cache.rglob("*"))
    assert not list((tmp_path / "vllm").glob(".prebake-*")) and not (Path("/tmp") / "evil").exists()


def test_long_names_across_blocks_and_base_256_numbers_are_read_right(tmp_path, hub):
    """What a correct archiver may write is restored: a GNU long name over two blocks, a PAX path, a ustar prefix,
    a base-256 size, a global PAX header, an old tar's folder; every file's bytes and time as archived."""
    gnu_name = TOP + "/inductor_cache/" + "/".join(["g" * 200] * 3)
    pax_name = TOP + "/rank_0_0/" + "p" * 200 + "/" + "p" * 100
    prefixed = TOP + "/" + "q" * 40 + "/model"
    payload = os.urandom(70_000)
    archive = gz(manifest(), pax({"comment": "made by hand"}, tarfile.XGLTYPE),
                 gnu_long(gnu_name.encode()), member("ignored", b"gnu"),
                 pax({"path": pax_name, "mtime": "1600000000.5"}), member("ignored", b"pax"),
                 member(prefixed, b"prefix"),
                 header(TOP + "/big", raw_size=b"\x80" + len(payload).to_bytes(11, "big")) + data(payload),
                 header(TOP + "/old/", 0, tarfile.AREGTYPE), end())
    outcome = run_restore(hub, archive, tmp_path)["outcome"]
    assert outcome["state"] == "restored" and outcome["files"] == 4, outcome
    root = tmp_path / "vllm"
    assert (root / gnu_name).read_bytes() == b"gnu" and (root / pax_name).read_bytes() == b"pax"
    assert (root / prefixed).read_bytes() == b"prefix" and (root / TOP / "big").read_bytes() == payload
    assert (root / TOP / "old").is_dir()
    assert int((root / pax_name).stat().st_mtime) == 1_600_000_000
    assert int((root / prefixed).stat().st_mtime) == 1_700_000_000


def test_an_archive_of_the_publisher_restores(tmp_path, hub):
    """What cachepublish.build_archive writes (tarfile's PAX format, names past 100 characters) reads back."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, payload in [(MANIFEST, json.dumps({"key": KEY}).encode()),
                              (TOP + "/inductor_cache/" + "z" * 150 + "/kernel.so", b"\x7fELF"),
                              (TOP + "/rank_0_0/model", b"m" * 5000)]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    outcome = run_restore(hub, gzip.compress(raw.getvalue()), tmp_path)["outcome"]
    assert outcome["state"] == "restored" and outcome["files"] == 2, outcome
    assert (tmp_path / "vllm" / TOP / "rank_0_0" / "model").read_bytes() == b"m" * 5000
