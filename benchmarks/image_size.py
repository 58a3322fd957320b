#!/usr/bin/env python3
"""How big an image is, compressed as a registry stores it, and what takes the space.

For one image reference it prints:
- the uncompressed size (what `docker images` shows) and the compressed size: every layer tar
  from `docker save`, gzip level 6 (what `docker push` uploads: Go's gzip at its default level),
  compressed in 16 MiB independent pieces on every core (like pigz; the pieces cost < 0.1 %);
- the layers in groups (base / OS packages / venv + Python set / toolchain links / variant
  layers with the entrypoint), and the entrypoint layer's share of the image;
- the biggest space users inside /opt/venv (du in a container without network).

    python3 benchmarks/image_size.py prebake-offline:a40-vllm0.27.1-cu13.0
    python3 benchmarks/image_size.py IMAGE --no-compress        # seconds instead of minutes
    python3 benchmarks/image_size.py IMAGE --json sizes.json
    python3 benchmarks/image_size.py IMAGE --trial-trim prebake-offline:a40-trim-trial --selftest a40 --images-dir images/offline
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import tarfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[1]

PIECE = 16 << 20
VENV = "/opt/venv"
# Layer groups, from each layer's history line (the classic builder's "/bin/sh -c ..." / "#(nop) COPY ...").
# The first stack step (the extra-CA COPY) ends the base image's layers.
STACK_START = re.compile(r"/usr/local/share/ca-certificates")
GROUPS = (
    ("OS packages", re.compile(r"apt-get|update-ca-certificates|/usr/local/share/ca-certificates|cuda-compat")),
    ("venv + Python set", re.compile(r" -m venv |installer\.txt|pip install|requirements\.lock")),
    ("toolchain links", re.compile(r"CUDA_HOME|ldconfig")),
)
VARIANT = "variant layers (host files, entrypoint, marker)"
ENTRYPOINT = re.compile(r"/opt/prebake/entrypoint/")


@dataclass
class Layer:
    index: int
    created_by: str
    group: str
    size: int = 0  # bytes of the uncompressed layer tar
    compressed: int = 0


@dataclass
class Report:
    image: str
    image_id: str
    docker_size: int
    layers: list[Layer] = field(default_factory=list)
    venv: list[tuple[str, int]] = field(default_factory=list)
    seconds: float = 0.0

    def groups(self) -> dict[str, tuple[int, int, int]]:
        out: dict[str, tuple[int, int, int]] = {}
        for layer in self.layers:
            count, size, compressed = out.get(layer.group, (0, 0, 0))
            out[layer.group] = (count + 1, size + layer.size, compressed + layer.compressed)
        return out


def gzip_size(stream: io.BufferedIOBase, pool: ThreadPoolExecutor, level: int) -> tuple[int, int]:
    """(raw bytes, gzip bytes) of a stream, compressed in independent pieces on every core."""
    def compress(piece: bytes) -> int:
        packer = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: gzip framing, as `gzip -6`
        return len(packer.compress(piece)) + len(packer.flush())

    raw, pending, total = 0, [], 0
    limit = 2 * (os.cpu_count() or 2)
    while piece := stream.read(PIECE):
        raw += len(piece)
        pending.append(pool.submit(compress, piece))
        if len(pending) >= limit:
            total += pending.pop(0).result()
    return raw, total + sum(f.result() for f in pending)


def layer_sizes(client: docker.DockerClient, image_id: str, level: int | None) -> tuple[list[int], list[int], dict]:
    """Stream `docker save`: raw and gzip sizes of every layer tar, in the image's layer order, and its config."""
    class Chunks(io.RawIOBase):  # the SDK's generator of chunks as a file for tarfile's stream mode
        def __init__(self, chunks):
            self.chunks, self.rest = chunks, b""

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            while not self.rest:
                try:
                    self.rest = next(self.chunks)
                except StopIteration:
                    return 0
            n = min(len(buffer), len(self.rest))
            buffer[:n], self.rest = self.rest[:n], self.rest[n:]
            return n

    saved = io.BufferedReader(Chunks(iter(client.images.get(image_id).save(chunk_size=4 << 20))), 4 << 20)
    sizes: dict[str, tuple[int, int]] = {}
    small: dict[str, bytes] = {}
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool, tarfile.open(fileobj=saved, mode="r|") as archive:
        for member in archive:
            if not member.isfile():
                continue
            data = archive.extractfile(member)
            if member.name.endswith(".json") or member.size < (1 << 20) and not member.name.endswith("layer.tar"):
                small[member.name] = data.read()
            elif level is None:
                sizes[member.name] = (member.size, 0)
            else:
                sizes[member.name] = gzip_size(data, pool, level)
    manifest = json.loads(small["manifest.json"])[0]
    config = json.loads(small[manifest["Config"]])
    raw = [sizes.get(name, (len(small.get(name, b"")), 0))[0] for name in manifest["Layers"]]
    packed = [sizes.get(name, (0, 0))[1] for name in manifest["Layers"]]
    return raw, packed, config


def classify(config: dict) -> list[Layer]:
    layers, in_base = [], True
    for entry in config["history"]:
        if entry.get("empty_layer"):
            continue
        created_by = entry.get("created_by", "")
        if in_base and STACK_START.search(created_by):
            in_base = False
        group = "base image" if in_base else next(
            (name for name, pattern in GROUPS if pattern.search(created_by)), VARIANT)
        layers.append(Layer(len(layers), created_by, group))
    return layers


def venv_users(client: docker.DockerClient, image_id: str, top: int) -> list[tuple[str, int]]:
    """The biggest folders and files in the venv's site-packages, nvidia/ and nvidia/cu13/lib, in bytes."""
    # One du per level: given overlapping arguments, du counts a folder once and skips the rest.
    script = (f"cd {VENV}/lib/python3*/site-packages && "
              "for level in '*' 'nvidia/*' 'nvidia/cu13/*' 'nvidia/cu13/lib/*'; do du -sk -- $level 2>/dev/null; done; "
              f"find {VENV} -name __pycache__ -prune -exec du -sk {{}} + | awk '{{s+=$1}} END {{print s\"\\t(all __pycache__)\"}}'; "
              "du -sk /var/cache/apt /usr/lib/gcc 2>/dev/null")
    out = client.containers.run(image_id, entrypoint=["sh", "-c", script], remove=True, network_disabled=True)
    rows = []
    for line in out.decode().splitlines():
        kib, _, path = line.partition("\t")
        if kib.isdigit():
            rows.append((path, int(kib) * 1024))
    return sorted(rows, key=lambda row: -row[1])[:top]


def measure(client: docker.DockerClient, ref: str, level: int | None, top: int) -> Report:
    start = time.monotonic()
    image = client.images.get(ref)
    report = Report(ref, image.id, image.attrs["Size"])
    raw, packed, config = layer_sizes(client, image.id, level)
    report.layers = classify(config)
    if len(report.layers) != len(raw):
        raise SystemExit(f"{len(report.layers)} non-empty history entries but {len(raw)} layers: cannot group them")
    for layer, size, compressed in zip(report.layers, raw, packed):
        layer.size, layer.compressed = size, compressed
    report.venv = venv_users(client, image.id, top)
    report.seconds = round(time.monotonic() - start, 1)
    return report


def gb(n: int) -> str:
    return f"{n / 1e9:6.2f} GB"


def mb(n: int) -> str:
    return f"{n / 1e6:9.1f} MB"


def show(report: Report, compressed: bool) -> None:
    total = sum(layer.size for layer in report.layers)
    packed = sum(layer.compressed for layer in report.layers)
    print(f"image {report.image} ({report.image_id[:19]})")
    print(f"uncompressed: {gb(report.docker_size)} (docker's Size), layer tars {gb(total)}")
    if compressed:
        print(f"compressed:   {gb(packed)} (gzip -6 of every layer tar, as a registry stores it)")
    print("\nlayer groups:" + ("" if compressed else " (uncompressed only)"))
    for name, (count, size, gz) in report.groups().items():
        share = f"{100 * size / total:5.1f} %"
        print(f"  {name:<48} {count:2} layers {gb(size)}" + (f"  {gb(gz)} gz" if compressed else "") + f"  {share}")
    entry = [layer for layer in report.layers if ENTRYPOINT.search(layer.created_by)]
    for layer in entry:
        print(f"\nentrypoint layer: {layer.size / 1e3:.1f} kB ({100 * layer.size / total:.4f} % of the image)"
              + (f", {layer.compressed / 1e3:.1f} kB compressed" if compressed else ""))
    print("\nlayers:")
    for layer in report.layers:
        what = re.sub(r"\s+", " ", re.sub(r"^/bin/(ba)?sh( -o pipefail)? -c (#\(nop\) )?", "", layer.created_by))[:90]
        print(f"  {layer.index:2} {mb(layer.size)}" + (f" {mb(layer.compressed)} gz" if compressed else "")
              + f"  {what or '(' + layer.group + ')'}")
    print(f"\nbiggest space users (du in a container; site-packages paths are relative to {VENV}/lib/python3.*/site-packages):")
    for path, size in report.venv:
        print(f"  {mb(size)}  {path}")
    print(f"\n({report.seconds} s)")


# --trial-trim: what the image would weigh without what nothing loads at run time. Runs ONLY in a
# container of a prebake image (the guard), never on the host. docs/selftest.md says why each is safe.
# The trial trim: the OS step's clean-up, then the same venv slimming the stack template runs
# (templates/files/slim-venv.sh, one source), on a container of an already built image.
TRIM_SCRIPT = r"""
[ -f /opt/.image_prebaked ] && [ -x /opt/venv/bin/python ] || { echo "not a prebake image: no trim" >&2; exit 2; }
# apt's package cache (a debootstrap base has no docker-clean hook); docs, man pages, translations
apt-get clean && rm -rf /var/cache/apt/*.bin /var/lib/apt/lists/*
rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/*
find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
cat > /tmp/slim-venv.sh <<'SLIM_VENV_EOF'
""" + (ROOT / "templates" / "files" / "slim-venv.sh").read_text() + r"""SLIM_VENV_EOF
sh /tmp/slim-venv.sh "$CUDA_HOME/lib"
ldconfig
"""


def config_changes(config: dict) -> list[str]:
    """Dockerfile instructions that give an imported (squashed) image the original's configuration."""
    changes = [f"ENV {name}={json.dumps(value)}" for name, _, value in (e.partition("=") for e in config["Env"] or [])]
    changes += [f"ENTRYPOINT {json.dumps(config.get('Entrypoint') or [])}", f"CMD {json.dumps(config.get('Cmd') or [])}"]
    changes += [f"LABEL {key}={json.dumps(value)}" for key, value in (config.get("Labels") or {}).items()]
    return changes


def trial_trim(client: docker.DockerClient, ref: str, target: str) -> str:
    """Trim a container of `ref`, then squash it into the image `target` (export | import)."""
    image = client.images.get(ref)
    container = client.containers.create(image.id, entrypoint=["sh", "-euc", TRIM_SCRIPT], network_disabled=True)
    try:
        container.start()
        status = container.wait()["StatusCode"]
        if status != 0:
            raise SystemExit(f"the trim failed ({status}): {container.logs().decode(errors='replace')[-2000:]}")
        repository, _, tag = target.rpartition(":")
        client.api.import_image_from_stream(container.export(chunk_size=4 << 20), repository=repository, tag=tag,
                                            changes=config_changes(image.attrs["Config"]))
    finally:
        container.remove(force=True)
    return target


def selftest_trimmed(client: docker.DockerClient, image: str, variant_name: str, images_dir: str) -> bool:
    """The build's self-test on the trimmed image: proof that nothing vLLM needs went."""
    from prebake import selftest
    from prebake.variants import get_variant

    variant = get_variant(variant_name, Path(images_dir).resolve())
    status, report, stderr = selftest.run_in_image(client, image, selftest.spec_for(
        variant, variant.stack.lock.read_text()))
    for item in report:
        mark = "skip" if item.get("skipped") else "ok  " if item["ok"] else "FAIL"
        print(f"[self-test] {mark} {item['check']}: {item['detail'][:400]}")
    if not report:
        print(stderr[-2000:])
    return status == 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", help="an image reference or id")
    parser.add_argument("--no-compress", action="store_true", help="skip the gzip pass (minutes on a 9 GB image)")
    parser.add_argument("--level", type=int, default=6, help="gzip level (default 6, docker push's)")
    parser.add_argument("--top", type=int, default=30, help="rows of the du table")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--trial-trim", metavar="TAG",
                        help="also trim a copy of the image (TRIM_SCRIPT, in a container), squash it as TAG, measure it")
    parser.add_argument("--selftest", metavar="VARIANT", help="with --trial-trim: run the build's self-test on TAG")
    parser.add_argument("--images-dir", default=str(ROOT / "images"), help="variants folder for --selftest")
    args = parser.parse_args(argv)
    client = docker.from_env(timeout=3600)
    level = None if args.no_compress else args.level
    report = measure(client, args.image, level, args.top)
    show(report, not args.no_compress)
    data = asdict(report) | {"groups": report.groups()}
    passed = True
    if args.trial_trim:
        print(f"\n=== trial trim -> {args.trial_trim}")
        trimmed = measure(client, trial_trim(client, args.image, args.trial_trim), level, args.top)
        show(trimmed, not args.no_compress)
        data["trial_trim"] = asdict(trimmed)
        before = sum(layer.compressed for layer in report.layers)
        after = sum(layer.compressed for layer in trimmed.layers)
        print(f"\ntrial trim: {gb(report.docker_size)} -> {gb(trimmed.docker_size)} uncompressed"
              + (f", {gb(before)} -> {gb(after)} compressed" if level is not None else ""))
        if args.selftest:
            passed = selftest_trimmed(client, args.trial_trim, args.selftest, args.images_dir)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
