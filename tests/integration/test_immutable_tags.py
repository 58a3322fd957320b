"""A versioned tag never moves, against a real local docker-registry (and a proxy in front of it that fails
on purpose): a re-run of a published revision pushes nothing, another image under a published versioned tag is
refused, a hung registry is given up on in bounded time, a failed moving-tag push leaves the local tag alone."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.request

import docker
import pytest

from prebake import publish
from prebake.errors import PrebakeError
from prebake.tags import image_tags
from prebake_testing.buildpy import TEST_BASE, TINY_ARGS, run_build_py

pytestmark = pytest.mark.docker


def _build(registry: str, revision: str, extra_ca, *more: str, env: dict | None = None):
    args = ["--variant", "tiny", *TINY_ARGS, "--extra-ca", str(extra_ca), "--registry", registry,
            "--revision", revision, "--push", *more]
    return run_build_py(*args, env={**os.environ, **(env or {})})


def _digest(registry, repository: str, tag: str) -> str | None:
    request = urllib.request.Request(f"http://{registry.address}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.headers["Docker-Content-Digest"]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


class FaultyProxy:
    """A TCP proxy to a registry that, on a request line matching `pattern`, hangs (says nothing until stopped)
    or drops the connection. Everything else passes through byte for byte."""

    def __init__(self, upstream: str, pattern: bytes, action: str):
        self.upstream_host, port = upstream.split(":")
        self.upstream_port = int(port)
        self.pattern, self.action = re.compile(pattern), action
        self.hits = 0
        self.stopped = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.5)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            upstream = socket.create_connection((self.upstream_host, self.upstream_port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, inspect: bool) -> None:
        tail = b""
        try:
            while not self.stopped.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if inspect and self.pattern.search(tail + data):
                    self.hits += 1
                    if self.action == "drop":
                        break
                    self.stopped.wait(120)  # hang: read nothing more, answer nothing (bounded)
                    break
                tail = (tail + data)[-512:]
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture
def proxies():
    started: list[FaultyProxy] = []

    def start(upstream: str, pattern: bytes, action: str) -> FaultyProxy:
        started.append(FaultyProxy(upstream, pattern, action))
        return started[-1]

    yield start
    for proxy in started:
        proxy.stop()


def test_a_rerun_of_a_published_revision_builds_and_pushes_nothing(registry, tiny, extra_ca):
    first = _build(registry.address, "same01", extra_ca)
    assert first.returncode == 0, first.stderr[-3000:]
    published = _digest(registry, "prebake-test", "tiny-cu13.0-same01")
    assert published
    again = _build(registry.address, "same01", extra_ca)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"already published: {registry.address}/prebake-test:tiny-cu13.0-same01 ({published})" in again.stdout
    assert "a versioned tag never moves" in again.stderr and "--revision" in again.stderr
    assert "[push]" not in again.stderr and "[tiny] step" not in again.stderr  # nothing built, nothing pushed
    assert _digest(registry, "prebake-test", "tiny-cu13.0-same01") == published


def test_another_image_under_a_published_versioned_tag_is_refused(client, registry, tiny, extra_ca):
    """What a concurrent job (or a registry filled behind our back) meets at push time: refused, nothing moves."""
    first = _build(registry.address, "race01", extra_ca)
    assert first.returncode == 0, first.stderr[-3000:]
    versioned, moving = _digest(registry, "prebake-test", "tiny-cu13.0-race01"), _digest(registry, "prebake-test", "tiny")
    tags = image_tags(f"{registry.address}/prebake-test", "tiny", None, "13.0", "race01")
    built = client.images.get(f"{registry.address}/prebake-test:tiny-cu13.0-race01").id
    other = client.images.get(TEST_BASE).id  # any other image
    with pytest.raises(PrebakeError, match="is already in the registry as sha256:.*a versioned tag never moves") as e:
        publish.tag_and_push(client, other, tags, push=True)
    assert "--revision" in str(e.value)
    assert _digest(registry, "prebake-test", "tiny-cu13.0-race01") == versioned
    assert _digest(registry, "prebake-test", "tiny") == moving
    assert client.images.get(f"{registry.address}/prebake-test:tiny-cu13.0-race01").id == built  # not moved here
    # The same image again pushes nothing new and answers the registry's digest.
    pushed = publish.tag_and_push(client, built, tags, push=True)
    assert pushed[f"{registry.address}/prebake-test:tiny-cu13.0-race01"] == versioned
    assert _digest(registry, "prebake-test", "tiny") == moving


def test_a_registry_that_hangs_on_the_manifest_is_given_up_on(client, registry, tiny, extra_ca, proxies):
    proxy = proxies(registry.address, rb"PUT /v2/[^ ]*/manifests/", "hang")
    started = time.monotonic()
    result = _build(proxy.address, "hang01", extra_ca, env={"PREBAKE_PUSH_TIMEOUT_S": "5"})
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert f"pushing {proxy.address}/prebake-test:tiny-cu13.0-hang01: the registry sent nothing for 5 s" \
        in result.stderr
    assert proxy.hits >= 1 and elapsed < 90
    assert registry.tags("prebake-test") == []  # no manifest landed, no moving tag either
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(f"{proxy.address}/prebake-test:tiny")


def test_a_failed_moving_tag_push_puts_the_local_tag_back(client, registry, tiny, extra_ca, proxies):
    proxy = proxies(registry.address, rb"PUT /v2/prebake-test/manifests/tiny ", "drop")
    short = f"{proxy.address}/prebake-test:tiny"
    client.images.get(TEST_BASE).tag(short)  # where the short tag pointed before this build
    try:
        result = _build(proxy.address, "moving01", extra_ca)
        assert result.returncode == 1, result.stderr[-3000:]
        assert "Traceback" not in result.stderr and f"[push] {short}" in result.stderr
        assert proxy.hits >= 1
        assert client.images.get(short).id == client.images.get(TEST_BASE).id  # put back
        assert registry.tags("prebake-test") == ["tiny-cu13.0", "tiny-cu13.0-moving01"]
    finally:
        client.api.remove_image(short, noprune=True)


def test_connection_refused_is_not_worded_as_a_refusal(client, tiny):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ref = f"127.0.0.1:{port}/prebake-test:tiny-cu13.0-nowhere"
    client.images.get(tiny["image"]).tag(ref)
    try:
        with pytest.raises(PrebakeError) as e:
            publish.push_ref(client, ref, None)
        assert str(e.value).startswith(f"could not reach the registry for {ref}")
        assert "check its address" in str(e.value) and "credentials" not in str(e.value)
    finally:
        client.api.remove_image(ref, noprune=True)


def test_base_image_build_arg_is_the_stack_base(tiny, extra_ca):
    """--build-arg BASE_IMAGE=X names the same stack as --base X: same content address, same marker base."""
    args = ["--variant", "tiny", "--images-dir", TINY_ARGS[1], "--without", "cuda-compat", "--extra-ca", str(extra_ca),
            "--build-arg", f"BASE_IMAGE={TEST_BASE}", "--revision", "basearg01"]
    built = run_build_py(*args)
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"stack: {tiny['stack']}" in built.stdout  # the stack built FROM the test base, found by its address
    assert "is already built" in built.stderr
    image = docker.from_env().images.get("prebake-test:tiny-cu13.0-basearg01")
    base = image.labels["org.opencontainers.image.base.name"]
    assert base.startswith(f"{TEST_BASE}@sha256:"), base  # the real base, by its local image id
    marker = docker.from_env().containers.run(image.id, entrypoint=["cat", "/opt/.image_prebaked"], remove=True)
    assert f'"{base}"' in marker.decode()


def test_a_stack_already_in_the_registry_is_used_not_rebuilt_or_pushed_over(registry, tiny, extra_ca):
    args = ("stack", "--variant", "tiny", *TINY_ARGS, "--extra-ca", str(extra_ca), "--registry", registry.address,
            "--push")
    first = run_build_py(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    key = tiny["stack"].partition(":")[2]
    digest = _digest(registry, "prebake-stack", key)
    again = run_build_py(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip().splitlines()[-1] == f"stack-image={registry.address}/prebake-stack@{digest}"
    assert "nothing built, nothing pushed" in again.stderr and "[push]" not in again.stderr
    assert _digest(registry, "prebake-stack", key) == digest
