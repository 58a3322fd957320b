#!/usr/bin/env python3
"""Where a push and a pull of an image spend their time: the phases no layering or compression
choice of ours can remove, each measured alone, against the issue-12 targets.

Usage (root; the image built beforehand, docs/measurements.md):
    python3 -m benchmarks.publish_floor --image prebake-offline:a40-vllm0.27.1-cu13.0 \\
        [--workdir /var/tmp/prebake-publish-floor]

Phases, one after the other, on an otherwise idle machine:
  export     the engine writes the image's layers as tar (`docker save`, read and thrown away):
             every push from this engine does this first, whatever tool compresses after it;
  compress   zstd -3 (all cores) of the saved layers, what a zstd push has to do at least;
  extract    plain `tar -x` of every layer into an empty folder on the same disk, then sync:
             the least any engine's unpacking can take;
  fetch      containerd downloading the zstd image from a local registry into its content
             store (`ctr content fetch`), nothing unpacked;
  unpack     containerd unpacking what it fetched into its overlayfs snapshotter
             (`ctr images mount`);
  docker     an empty Docker Engine pulling the same zstd image (Docker >= 23: --engines-from),
             with the CPU seconds its dockerd and the children it reaped (the untar) used: a
             CPU/wall ratio near the core count means the pull is bound by this machine's cores.
Needs docker, containerd/ctr, docker-registry, skopeo and zstd, and twice the image's size
free under --workdir.
"""

import argparse
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import docker

from benchmarks.publish_bench import (EmptyContainerd, EmptyEngine, Registry, cleanup_bridge, dockerd_major, push,
                                      require_root_and_tools)


def timed(what: str, function) -> float:
    started = time.monotonic()
    function()
    seconds = time.monotonic() - started
    print(json.dumps({"phase": what, "seconds": round(seconds, 1)}), flush=True)
    return seconds


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of the children it has reaped (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def export(client: docker.DockerClient, image: str, into: Path | None) -> None:
    """`docker save` of the image, to a file or thrown away."""
    with (into.open("wb") if into else open(os.devnull, "wb")) as sink:
        for chunk in client.images.get(image).save(chunk_size=4 << 20):
            sink.write(chunk)


def saved_layers(archive: Path, folder: Path) -> list[Path]:
    """The layer tars of a `docker save` archive, in the image's order, written to `folder`."""
    with tarfile.open(archive) as saved:
        manifest = json.load(saved.extractfile("manifest.json"))
        layers = []
        for number, name in enumerate(manifest[0]["Layers"]):
            target = folder / f"{number:02d}.tar"
            with saved.extractfile(name) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink, 4 << 20)
            layers.append(target)
    return layers


def run_all(commands: list[list[str]]) -> None:
    for command in commands:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True)
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp/prebake-publish-floor"))
    parser.add_argument("--engines-from", type=Path,
                        help="a folder whose dockerd, containerd and ctr the empty engines run (publish_bench.py)")
    options = parser.parse_args()
    if options.engines_from:
        os.environ["PATH"] = f"{options.engines_from}:{os.environ['PATH']}"
    require_root_and_tools("the benchmark starts its own containerd",
                           ("containerd", "ctr", "docker-registry", "skopeo", "zstd", "tar"),
                           "containerd docker-registry skopeo zstd")
    client = docker.from_env(timeout=900)
    work = options.workdir
    shutil.rmtree(work, ignore_errors=True)
    (work / "layers").mkdir(parents=True)
    figures = {}
    try:
        figures["export"] = timed("export: docker save, thrown away", lambda: export(client, options.image, None))
        export(client, options.image, work / "saved.tar")
        layers = saved_layers(work / "saved.tar", work / "layers")
        (work / "saved.tar").unlink()
        size = sum(layer.stat().st_size for layer in layers)
        print(json.dumps({"layers": len(layers), "bytes": size}), flush=True)
        figures["zstd"] = timed("compress: zstd -3 -T0", lambda: run_all(
            [["zstd", "-q", "-3", "-T0", "-f", str(layer)] for layer in layers]))
        for layer in layers:
            Path(f"{layer}.zst").unlink()
        extract_to = work / "root"
        extract_to.mkdir()
        subprocess.run(["sync"], check=True)
        figures["extract"] = timed("extract: tar -x of every layer, then sync", lambda: run_all(
            [*(["tar", "-C", str(extract_to), "-xf", str(layer)] for layer in layers), ["sync"]]))
        shutil.rmtree(extract_to)
        shutil.rmtree(work / "layers")
        registry = Registry(work / "registry")
        try:
            ref = f"{registry.address}/floor:zstd"
            push(client, options.image, ref, "zstd")
            engine = EmptyContainerd(work / "engine", downloads=3)
            try:
                mount = work / "mnt"
                mount.mkdir()

                def ctr(*args: str) -> None:
                    done = engine._ctr(*args)
                    if done.returncode:
                        raise RuntimeError(f"ctr {' '.join(args)}: {done.stderr.strip()[-500:]}")

                figures["fetch"] = timed("fetch: containerd, zstd layers, local registry",
                                         lambda: ctr("content", "fetch", "--plain-http", ref))
                figures["unpack"] = timed("unpack: containerd, into its overlayfs snapshotter",
                                          lambda: ctr("images", "mount", ref, str(mount)))
                subprocess.run(["umount", str(mount)], check=False)
            finally:
                engine.stop()
            if dockerd_major() >= 23:
                docker_engine = EmptyEngine(work / "engine", downloads=3)
                try:
                    before = cpu_seconds(docker_engine.process.pid)
                    figures["docker"] = docker_engine.pull(ref)
                    figures["docker_cpu"] = cpu_seconds(docker_engine.process.pid) - before
                    print(json.dumps({"phase": "docker pull, zstd", "seconds": round(figures["docker"], 1),
                                      "dockerd_cpu_seconds": round(figures["docker_cpu"], 1)}), flush=True)
                finally:
                    docker_engine.stop()
                    cleanup_bridge()
        finally:
            registry.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n| phase ({size / 1e9:.2f} GB of layers) | seconds | bounds |")
    print("|---|---|---|")
    print(f"| export (docker save) | {figures['export']:.1f} | every push from this engine (target 60 s) |")
    print(f"| zstd -3, all cores | {figures['zstd']:.1f} | the zstd push |")
    print(f"| tar -x + sync | {figures['extract']:.1f} | any pull into overlayfs on this disk |")
    print(f"| containerd fetch (zstd) | {figures['fetch']:.1f} | the zstd pull (target 45 s) |")
    print(f"| containerd unpack | {figures['unpack']:.1f} | the zstd pull (target 45 s) |")
    print(f"fetch + unpack: {figures['fetch'] + figures['unpack']:.1f} s")
    if "docker" in figures:
        print(f"Docker pull (zstd): {figures['docker']:.1f} s, dockerd and its untar {figures['docker_cpu']:.1f} CPU s "
              f"({figures['docker_cpu'] / figures['docker']:.2f} of {os.cpu_count()} cores busy on average)")


if __name__ == "__main__":
    main()
