"""--compression zstd: skopeo pushes zstd layers to a real (local) registry; the variants still share
the stack's layers by digest, and moving from one variant to another pulls under 1 MB."""

import io
import json
import os
import shutil
import subprocess
import tarfile
import urllib.request

import pytest

from prebake_testing.buildpy import TINY_ARGS, run_build_py

pytestmark = pytest.mark.docker

ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
ACCEPT = ", ".join(["application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"])


def _manifest(registry, repository: str, reference: str) -> tuple[str, dict]:
    request = urllib.request.Request(f"http://{registry.address}/v2/{repository}/manifests/{reference}",
                                     headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Docker-Content-Digest"], json.load(response)


def _blob(registry, repository: str, digest: str) -> bytes:
    with urllib.request.urlopen(f"http://{registry.address}/v2/{repository}/blobs/{digest}", timeout=30) as r:
        return r.read()


@pytest.fixture(scope="module", autouse=True)
def _skopeo():
    if not shutil.which("skopeo"):
        pytest.fail("skopeo is not installed (.ci/run installs Debian's skopeo)", pytrace=False)


def test_zstd_push_shares_the_stack_layers_and_moves_tags_to_the_same_manifest(registry, tiny, extra_ca):
    env = {**os.environ, "PREBAKE_COMPRESSION": "zstd"}  # the variable, as CI would set it
    ca = ("--extra-ca", str(extra_ca))
    stack = run_build_py("stack", "--variant", "tiny", *TINY_ARGS, *ca, "--registry", registry.address, "--push",
                         env=env)
    assert stack.returncode == 0, stack.stderr[-3000:]
    for variant in ("tiny", "tinyada"):
        built = run_build_py("--variant", variant, *TINY_ARGS, *ca, "--registry", registry.address, "--push",
                             "--revision", "zstd01", env=env)
        assert built.returncode == 0, built.stderr[-3000:]
        assert f"[push] {registry.address}/prebake-test:{variant}-cu13.0-zstd01 (zstd, skopeo)" in built.stderr

    key = tiny["stack"].partition(":")[2]
    _, stack_manifest = _manifest(registry, "prebake-stack", key)
    digest, tiny_manifest = _manifest(registry, "prebake-test", "tiny-cu13.0-zstd01")
    _, ada_manifest = _manifest(registry, "prebake-test", "tinyada-cu13.0-zstd01")
    for manifest in (stack_manifest, tiny_manifest, ada_manifest):
        assert {layer["mediaType"] for layer in manifest["layers"]} == {ZSTD_LAYER}
    # the moving tags name the versioned tag's manifest, byte for byte
    for moving in ("tiny", "tiny-cu13.0"):
        assert _manifest(registry, "prebake-test", moving)[0] == digest

    stack_layers = [layer["digest"] for layer in stack_manifest["layers"]]
    for manifest in (tiny_manifest, ada_manifest):
        assert [layer["digest"] for layer in manifest["layers"]][:len(stack_layers)] == stack_layers
    have = {layer["digest"] for layer in tiny_manifest["layers"]}
    to_pull = sum(layer["size"] for layer in ada_manifest["layers"] if layer["digest"] not in have)
    assert 0 < to_pull < 1_000_000

    # a layer is a real zstd frame holding a tar (Docker 20.10 here cannot pull zstd to show it)
    biggest = max(tiny_manifest["layers"], key=lambda layer: layer["size"])
    data = subprocess.run(["zstd", "-d", "-c"], input=_blob(registry, "prebake-test", biggest["digest"]),
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames()


def test_an_unknown_compression_is_refused_before_building():
    result = run_build_py("--variant", "tiny", *TINY_ARGS, "--compression", "brotli")
    assert result.returncode == 1
    assert "--compression (or PREBAKE_COMPRESSION) 'brotli': use one of gzip, zstd" in result.stderr
