#!/usr/bin/env python3
"""Publish benchmark: push and pull times of an image in layers against its single-layer build,
with gzip and with zstd layers, all in one run.

Usage (both images built beforehand; docs/measurements.md has the commands):
    python3 -m benchmarks.publish_bench --image prebake-offline:a40-vllm0.27.1-cu13.0 \\
        --baseline prebake-single:a40-vllm0.27.1-cu13.0 [--rate-mb 100] [--workdir /var/tmp/prebake-publish-bench]

For each image x compression, on a fresh local registry (Debian's docker-registry, loopback):
  push   the time to push it: gzip by the local engine (prebake.publish.push_ref, what
         `build.py --push` does), zstd by skopeo (prebake.skopeo, `--compression zstd`);
  pull   the time to pull it into an EMPTY second engine (its own dockerd, data root, exec root,
         pidfile, socket and bridge; never `--bridge none`, which deletes the first engine's
         docker0), straight from the registry, downloads in parallel as the engine defaults;
  link   the same through nginx in front of the registry with limit_rate RATE per connection,
         the engine set to one download at a time, so the link never carries more than RATE
         (parallel downloads would each get RATE); extraction still overlaps the next download.
Targets: push <= 60 s; pull <= 45 s zstd, <= 70 s gzip; link <= 75 % of the single-layer time.
Needs root (the second engine and its bridge), docker-registry, nginx and skopeo. Debian 12's
Docker 20.10 cannot pull zstd; --engines-from runs the empty engines from another folder, e.g.
Debian 13's docker.io 26 and containerd 1.7 (docs/measurements.md), which pull both.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import docker
import docker.errors

# Run as a module from the checkout's root (`sudo python3 -m benchmarks.publish_bench`): sudo's python3 is not the
# venv's, and the root on its path is where prebake comes from.
from prebake import publish, skopeo

BRIDGE = "prebake-bench0"
BRIDGE_ADDRESS = "10.213.77.1/24"  # a private range nothing else here uses
ACCEPT = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, docker.errors.DockerException):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start within {seconds:.0f} s")


class Registry:
    def __init__(self, root: Path):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root, self.address = root, f"127.0.0.1:{free_port()}"
        (root / "config.yml").write_text(
            f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            f"http:\n  addr: {self.address}\n")
        self.process = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1), "docker-registry")

    def layers(self, repository: str, tag: str) -> list[dict]:
        request = urllib.request.Request(f"http://{self.address}/v2/{repository}/manifests/{tag}",
                                         headers={"Accept": ACCEPT})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)["layers"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


class RateLimitedProxy:
    """nginx in front of `upstream`, each response sent at `rate_mb` MB/s."""

    def __init__(self, root: Path, upstream: str, rate_mb: int):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root, self.address = root, f"127.0.0.1:{free_port()}"
        (root / "nginx.conf").write_text(f"""
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen {self.address};
        client_max_body_size 0;
        location / {{
            proxy_pass http://{upstream};
            proxy_set_header Host $http_host;
            proxy_http_version 1.1;
            proxy_max_temp_file_size 0;
            limit_rate {rate_mb}m;
        }}
    }}
}}
""")
        self.process = subprocess.Popen(["nginx", "-p", str(root), "-c", str(root / "nginx.conf"), "-e",
                                         str(root / "error.log"), "-g", "daemon off;"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1), "nginx")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


class EmptyEngine:
    """A second Docker Engine with nothing in it: its own data root, exec root, pidfile, socket and
    bridge, no iptables changes. Started fresh for each pull, its data removed after."""

    def __init__(self, root: Path, downloads: int):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root = root
        subprocess.run(["ip", "link", "add", "name", BRIDGE, "type", "bridge"], check=False, capture_output=True)
        subprocess.run(["ip", "addr", "replace", BRIDGE_ADDRESS, "dev", BRIDGE], check=True)
        subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True)
        self.socket = root / "docker.sock"
        self.log = (root / "dockerd.log").open("w")
        self.process = subprocess.Popen(
            ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "--pidfile", str(root / "dockerd.pid"), "-H", f"unix://{self.socket}", "--bridge", BRIDGE,
             "--iptables=false", "--ip-masq=false", "--max-concurrent-downloads", str(downloads)],
            stdout=self.log, stderr=subprocess.STDOUT)
        # a fixed API version: the client would otherwise ask the engine before it listens
        self.client = docker.DockerClient(base_url=f"unix://{self.socket}", timeout=900, version="1.41")
        try:
            wait_for(lambda: self.socket.exists() and self.client.ping(),
                     f"the second dockerd (log: {root / 'dockerd.log'})")
        except BaseException:
            self.stop()
            raise
        assert not self.client.images.list(all=True), "the second engine is not empty"

    def pull(self, ref: str) -> float:
        repository, _, tag = ref.rpartition(":")
        started = time.monotonic()
        for chunk in self.client.api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise RuntimeError(f"pull of {ref} failed: {chunk['error']}")
        seconds = time.monotonic() - started
        self.client.images.get(ref)  # it is there
        return seconds

    def stop(self) -> None:
        self.client.close()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.log.close()
        unmount_below(self.root)  # dockerd mounts its data root on itself, and overlays below it
        shutil.rmtree(self.root, ignore_errors=True)


class EmptyContainerd:
    """A second containerd with nothing in it (its own root, state and socket; no CRI), pulling and
    unpacking with `ctr images pull` into its overlayfs snapshotter. Docker 20.10 cannot pull zstd
    layers ("archive/tar: invalid tar header"); containerd >= 1.5 can, and so can Docker >= 23."""

    def __init__(self, root: Path, downloads: int):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root, self.downloads = root, downloads
        self.socket = root / "containerd.sock"
        (root / "config.toml").write_text(
            f'version = 2\nroot = "{root / "root"}"\nstate = "{root / "state"}"\n'
            f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "{self.socket}"\n'
            f'[ttrpc]\n  address = "{root / "ttrpc.sock"}"\n')
        self.log = (root / "containerd.log").open("w")
        self.process = subprocess.Popen(["containerd", "--config", str(root / "config.toml")],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: self._ctr("version").returncode == 0, f"the second containerd (log: {root})")
        except BaseException:
            self.stop()
            raise

    def _ctr(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ctr", "--address", str(self.socket), "--namespace", "bench", *args],
                              capture_output=True, text=True)

    def pull(self, ref: str) -> float:
        started = time.monotonic()
        done = self._ctr("images", "pull", "--plain-http", "--max-concurrent-downloads", str(self.downloads), ref)
        seconds = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"ctr pull of {ref} failed: {done.stderr.strip()[-500:]}")
        if ref not in self._ctr("images", "ls", "-q").stdout.split():
            raise RuntimeError(f"ctr pulled {ref} but does not list it")
        return seconds

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.log.close()
        unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def unmount_below(root: Path) -> None:
    """What a daemon mounted under `root` and left (one that died keeps its mounts)."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f if line.split()[1].startswith(str(root) + "/")]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)


def cleanup_bridge() -> None:
    subprocess.run(["ip", "link", "delete", BRIDGE], check=False, capture_output=True)


def push(client: docker.DockerClient, image: str, ref: str, compression: str) -> float:
    publish.tag(client, image, [ref])
    started = time.monotonic()
    try:
        if compression == "gzip":
            publish.push_ref(client, ref, None, out=sys.stdout)
        else:
            skopeo.push_from_engine(ref, ref, None, out=sys.stdout)
        return time.monotonic() - started
    finally:
        client.images.remove(ref, noprune=True)


ENGINES = {"dockerd": EmptyEngine, "containerd": EmptyContainerd}


def dockerd_major() -> int:
    """The major version of the dockerd the empty engines run (Docker pulls zstd from 23 on)."""
    version = subprocess.run(["dockerd", "--version"], capture_output=True, text=True, check=True).stdout
    return int(version.split("version ", 1)[1].split(".", 1)[0])


def pull_into_empty_engine(workdir: Path, engine_name: str, ref: str, downloads: int) -> float:
    engine = ENGINES[engine_name](workdir / "engine", downloads)
    try:
        return engine.pull(ref)
    finally:
        engine.stop()


def measure(client, workdir: Path, label: str, image: str, compression: str, rate_mb: int,
            engines: list[str]) -> list[dict]:
    registry = Registry(workdir / "registry")
    try:
        ref = f"{registry.address}/bench:{compression}"
        pushed = push(client, image, ref, compression)
        layers = registry.layers("bench", compression)
        rows = []
        for engine in engines:
            if engine == "dockerd" and compression == "zstd" and dockerd_major() < 23:
                continue  # Docker 20.10 cannot pull zstd layers
            row = {"image": label, "compression": compression, "engine": engine, "push": pushed,
                   "layers": len(layers), "bytes": sum(layer["size"] for layer in layers),
                   "biggest": max(layer["size"] for layer in layers)}
            row["pull"] = pull_into_empty_engine(workdir, engine, ref, downloads=3)
            proxy = RateLimitedProxy(workdir / "nginx", registry.address, rate_mb)
            try:
                row["link"] = pull_into_empty_engine(workdir, engine, f"{proxy.address}/bench:{compression}",
                                                     downloads=1)
            finally:
                proxy.stop()
            print(json.dumps(row), flush=True)
            rows.append(row)
        return rows
    finally:
        registry.stop()


def require_root_and_tools(why_root: str, tools: tuple[str, ...], packages: str) -> None:
    if os.geteuid() != 0:
        sys.exit(f"run as root: {why_root}")
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (apt-get install {packages})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True, help="the image in layers (this branch's build)")
    parser.add_argument("--baseline", help="the same image with the Python set in one layer (left out: only --image "
                        "is measured, with no ratio)")
    parser.add_argument("--rate-mb", type=int, default=100, help="the link's rate in MB/s (nginx limit_rate)")
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp/prebake-publish-bench"))
    parser.add_argument("--compressions", default="gzip,zstd")
    parser.add_argument("--engines", default="dockerd,containerd",
                        help="the empty engines to pull into: dockerd (gzip only on 20.10), containerd")
    parser.add_argument("--engines-from", type=Path,
                        help="a folder whose dockerd, containerd and ctr the empty engines run instead of PATH's "
                             "(e.g. Debian 13's docker.io 26 and containerd 1.7 unpacked with dpkg -x)")
    options = parser.parse_args()
    if options.engines_from:
        os.environ["PATH"] = f"{options.engines_from}:{os.environ['PATH']}"
    require_root_and_tools("the benchmark starts a second dockerd and its bridge",
                           ("dockerd", "containerd", "ctr", "docker-registry", "nginx", "skopeo", "ip"),
                           "docker.io docker-registry nginx skopeo iproute2")
    client = docker.from_env(timeout=900)
    rows = []
    try:
        for compression in options.compressions.split(","):
            images = (("single layer", options.baseline),) if options.baseline else ()
            for label, image in (*images, ("layers", options.image)):
                print(f"--- {label} ({image}), {compression}", flush=True)
                rows += measure(client, options.workdir, label, image, compression, options.rate_mb,
                                options.engines.split(","))
    finally:
        cleanup_bridge()
        shutil.rmtree(options.workdir, ignore_errors=True)

    print(f"\n| image | layers | compressed | biggest layer | push | pulled by | pull, empty engine | "
          f"pull at {options.rate_mb} MB/s |")
    print("|---|---|---|---|---|---|---|---|")
    single = {(row["compression"], row["engine"]): row for row in rows if row["image"] == "single layer"}
    for row in rows:
        ratio = ""
        base = single.get((row["compression"], row["engine"]))
        if row["image"] != "single layer" and base:
            ratio = f" ({100 * row['link'] / base['link']:.0f} % of single)"
        print(f"| {row['image']}, {row['compression']} | {row['layers']} | {row['bytes'] / 1e9:.2f} GB | "
              f"{row['biggest'] / 1e9:.2f} GB | {row['push']:.1f} s | {row['engine']} | {row['pull']:.1f} s | "
              f"{row['link']:.1f} s{ratio} |")
    print("targets: push <= 60 s; pull <= 45 s (zstd), <= 70 s (gzip); "
          f"at {options.rate_mb} MB/s <= 75 % of the single-layer time")


if __name__ == "__main__":
    main()
