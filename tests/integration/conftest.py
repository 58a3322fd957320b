"""Fixtures that drive a real Docker Engine: a locally made base, built test images, local registries.

.ci/run installs and starts the engine (Debian's docker.io), debootstrap and docker-registry.
"""

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import docker
import pytest

from prebake_testing.buildpy import (FIXTURE_IMAGES, FORK_SOURCE_URL, TEST_BASE, TINY_ARGS, parse_build_output,
                                     run_build_py)
from prebake_testing.net import free_port
from prebake_testing.selftest_runs import spec_of

# The real a40 image (images/offline), which CI does not build: the slow tests use it where it is built here.
A40_IMAGE = os.environ.get("PREBAKE_TEST_A40_IMAGE", "prebake-offline:a40-vllm0.27.1-cu13.0")

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    """The Docker Engine. What the tests made in it is removed when the whole run is over, not when this worker's
    session is (prebake_testing/engine_run.py)."""
    try:
        client = docker.from_env(timeout=900)
        client.ping()
    except docker.errors.DockerException as e:
        pytest.fail(f"these tests need a running Docker Engine (.ci/run starts one): {e}", pytrace=False)
    return client


@pytest.fixture(scope="session")
def test_base(client) -> str:
    """The Debian base the test stack builds on, made here with `./build.py local-base` (no registry needed)."""
    try:
        client.images.get(TEST_BASE)
    except docker.errors.ImageNotFound:
        result = run_build_py("local-base", "--tag", TEST_BASE)
        assert result.returncode == 0, result.stderr
    return TEST_BASE


@pytest.fixture(scope="session")
def extra_ca(tmp_path_factory) -> Path:
    """The CA a TLS-intercepting proxy signs with: PREBAKE_TEST_EXTRA_CA, the locally added CAs, or the system bundle."""
    if os.environ.get("PREBAKE_TEST_EXTRA_CA"):
        return Path(os.environ["PREBAKE_TEST_EXTRA_CA"])
    local = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    path = tmp_path_factory.mktemp("ca") / "extra-ca.pem"
    if local:
        path.write_bytes(b"".join(p.read_bytes() for p in local))
    else:
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", path)
    return path


@pytest.fixture(scope="module")
def a40(client) -> str:
    """The real a40 image's id, or a skip where it is not built (docs/selftest.md has the command)."""
    try:
        return client.images.get(A40_IMAGE).id
    except docker.errors.ImageNotFound:
        pytest.skip(f"{A40_IMAGE} is not built here (CI does not build it; docs/selftest.md has the command)")


@pytest.fixture(scope="session")
def tiny(client, test_base, extra_ca) -> dict:
    """The tiny test variant, built once through build.py as a user would."""
    # PREBAKE_SOURCE_URL as images.yml sets it: a fork's CI labels its images with the fork (test_labels)
    result = run_build_py("--variant", "tiny", *TINY_ARGS, "--extra-ca", str(extra_ca), "--revision", "itest01",
                          env={**os.environ, "PREBAKE_SOURCE_URL": FORK_SOURCE_URL})
    assert result.returncode == 0, f"build failed:\n{result.stderr[-4000:]}"
    built = parse_build_output(result.stdout)
    built["stderr"] = result.stderr
    return built


@pytest.fixture(scope="module")
def tiny_spec() -> dict:
    """The self-test spec of the tiny variant (prebake_testing.selftest_runs)."""
    return spec_of("tiny", FIXTURE_IMAGES)


@pytest.fixture
def derive(client):
    """derive(image, script): an image made by running `script` (sh -c) in `image`; removed after the test."""
    made = []

    def make(image: str, script: str) -> str:
        container = client.containers.run(image, entrypoint=["sh", "-euc", script], detach=True,
                                          network_disabled=True)
        try:
            status = container.wait()["StatusCode"]
            assert status == 0, container.logs().decode(errors="replace")
            made.append(container.commit().id)
        finally:
            container.remove(force=True)
        return made[-1]

    yield make
    for image in made:
        client.images.remove(image, force=True)


class Registry:
    def __init__(self, root: Path, readonly: bool = False):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            + (f"  maintenance:\n    readonly:\n      enabled: true\n" if readonly else "")
            + f"http:\n  addr: {self.address}\n"
        )
        self.process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("docker-registry did not start")

    def tags(self, repository: str) -> list[str]:
        try:
            with urllib.request.urlopen(f"http://{self.address}/v2/{repository}/tags/list", timeout=5) as r:
                return sorted(json.load(r)["tags"] or [])
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return []
            raise

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def registry(tmp_path):
    if not shutil.which("docker-registry"):
        pytest.fail("docker-registry is not installed (.ci/run installs Debian's docker-registry)", pytrace=False)
    reg = Registry(tmp_path / "registry")
    yield reg
    reg.stop()


@pytest.fixture
def readonly_registry(tmp_path):
    reg = Registry(tmp_path / "readonly", readonly=True)
    yield reg
    reg.stop()
