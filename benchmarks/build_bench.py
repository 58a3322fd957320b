#!/usr/bin/env python3
"""Build benchmark: cold build, warm rebuild after an entrypoint-only change, and pull sizes between variants.

Usage (defaults: the test variants, a locally made base):
    python3 benchmarks/build_bench.py [--images-dir tests/fixtures/images] [--variant tiny]
        [--base prebake-test-base:bookworm] [--extra-ca CA.pem] [--without cuda-compat] [--others ada,hopper]
        [--warm-only [--repeat 3]] [--registry bench.local]
Targets: warm rebuild under 5 % of the cold build and under 10 s; < 50 MB to pull a second variant.
"""

import argparse
import gzip
import hashlib
import os
import statistics
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker

REPO = Path(__file__).resolve().parent.parent
from prebake.variants import load_variants  # noqa: E402


def build(repo: Path, args: list[str]) -> tuple[float, str]:
    start = time.monotonic()
    result = subprocess.run([sys.executable, str(repo / "build.py"), *args], capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-3000:]}")
    image = next(line.split()[1] for line in result.stdout.splitlines() if line.startswith("image:"))
    return seconds, image


def layer_sizes(client: docker.DockerClient, image_id: str, wanted: set[str]) -> dict[str, tuple[int, int]]:
    """diff id -> (uncompressed bytes, gzip -6 bytes as a registry stores it) for the `wanted` layers of an image."""
    sizes = {}
    with tempfile.TemporaryFile() as saved:
        for chunk in client.images.get(image_id).save(named=False):
            saved.write(chunk)
        saved.seek(0)
        with tarfile.open(fileobj=saved) as tar:
            for member in tar:
                if not member.name.endswith("layer.tar"):
                    continue
                data = tar.extractfile(member).read()
                diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
                if diff_id in wanted:
                    sizes[diff_id] = (len(data), len(gzip.compress(data, 6)))
    return sizes


def pull_bytes(client: docker.DockerClient, held: str, wanted: str) -> tuple[int, int, int]:
    """What a host holding `held` must pull to run `wanted`: (layers, uncompressed, compressed)."""
    have = set(client.images.get(held).attrs["RootFS"]["Layers"])
    missing = [d for d in client.images.get(wanted).attrs["RootFS"]["Layers"] if d not in have]
    sizes = layer_sizes(client, wanted, set(missing))
    return len(missing), sum(sizes[d][0] for d in missing), sum(sizes[d][1] for d in missing)


def warm_rebuild(args: list[str], change: str = "an entrypoint-only change") -> float:
    """Seconds to rebuild from a copy of the repository whose entrypoint gained a comment (`change`: a
    different one per run, so that each run's entrypoint layer is new to Docker)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(shutil.copytree(REPO, Path(tmp) / "repo", ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__")))
        launch = repo / "entrypoint" / "launch.py"
        launch.write_text(launch.read_text() + f"\n# benchmark: {change}\n")
        seconds, _ = build(repo, args)
    return seconds


def load() -> str:
    return "load average " + " ".join(f"{value:.1f}" for value in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images-dir", default=str(REPO / "tests" / "fixtures" / "images"))
    parser.add_argument("--variant", default="tiny")
    parser.add_argument("--base", default="prebake-test-base:bookworm")
    parser.add_argument("--extra-ca")
    parser.add_argument("--without", default="cuda-compat")
    parser.add_argument("--registry", help="tag the builds under this namespace (nothing is pushed), leaving the "
                        "tags of the images you built yourself where they are")
    parser.add_argument("--others", help="comma-separated variants to build for the pull sizes (default: every "
                        "other variant of the folder; each builds its own FlashInfer kernels, up to an hour for "
                        "blackwell on 2 cores)")
    parser.add_argument("--pull-only", action="store_true", help="skip the cold/warm timings")
    parser.add_argument("--warm-only", action="store_true",
                        help="only the warm rebuild: build (cached; records the stack's self-test), then time "
                             "the rebuild after an entrypoint-only change (for images whose cold build takes minutes)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="warm rebuilds to time with --warm-only, each after another entrypoint change; the "
                             "median is printed too")
    options = parser.parse_args()
    common = ["--images-dir", options.images_dir, "--base", options.base, "--revision", "bench"]
    if options.without:
        common += ["--without", options.without]
    if options.extra_ca:
        common += ["--extra-ca", options.extra_ca]
    if options.registry:
        common += ["--registry", options.registry]
    client = docker.from_env(timeout=900)

    print(f"variant {options.variant} ({options.images_dir})")
    if options.warm_only:
        first, _ = build(REPO, ["--variant", options.variant, *common])
        print(f"build with every layer cached (self-test in full unless recorded): {first:7.1f} s ({load()})",
              flush=True)
        runs = []
        for run in range(max(1, options.repeat)):
            runs.append(warm_rebuild(["--variant", options.variant, *common], f"entrypoint-only change {run + 1}"))
            print(f"warm rebuild after an entrypoint change:  {runs[-1]:7.1f} s   ({load()})", flush=True)
        if len(runs) > 1:
            print(f"median of {len(runs)} warm rebuilds:          {statistics.median(runs):7.1f} s   (target < 10 s)")
        return
    if options.pull_only:
        _, image = build(REPO, ["--variant", options.variant, *common])
    else:
        cold, image = build(REPO, ["--variant", options.variant, "--no-cache", *common])
        warm = warm_rebuild(["--variant", options.variant, *common])
        print(f"cold build (--no-cache, stack included): {cold:7.1f} s")
        print(f"warm rebuild after an entrypoint change:  {warm:7.1f} s")
        print(f"ratio warm/cold:                          {100 * warm / cold:7.2f} %   (target < 5 %, and < 10 s)")

    others = [name for name in load_variants(Path(options.images_dir)) if name != options.variant]
    if options.others:
        others = [name for name in options.others.split(",") if name]
    for other in others:
        seconds, other_image = build(REPO, ["--variant", other, *common])
        print(f"build of {other} after it (its kernels unless already built): {seconds:7.1f} s")
        layers, raw, packed = pull_bytes(client, image, other_image)
        print(f"host holding {options.variant}, running {other}: {layers} layers to pull, "
              f"{raw / 1e6:.3f} MB uncompressed, {packed / 1e6:.3f} MB compressed   (target < 50 MB)")


if __name__ == "__main__":
    main()
