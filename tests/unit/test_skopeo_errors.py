"""The zstd push path (prebake/skopeo.py) keeps the engine path's guarantees: a registry that is not there is
called unreachable (not a credentials problem), one that accepts and never answers is given up on after
PREBAKE_PUSH_TIMEOUT_S of silence with skopeo killed, and the password is never in a message. The real skopeo
runs against loopback sockets; a push from the engine reads a one-file image."""

import io
import os
import shutil
import socket
import sys
import tarfile
import threading
import time

import docker
import pytest

from prebake import skopeo
from prebake.errors import PrebakeError

PASSWORD = "pw-Zq81-never-printed"
AUTH = {"username": "someone", "password": PASSWORD}
DIGEST = "sha256:" + "ab" * 32
ENGINE_IMAGE = "prebake-test-skopeo-errors:tiny"

pytestmark = pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo is not installed (.ci/run installs it)")


@pytest.fixture
def refusing_address():
    """A loopback port bound but not listening: a connection to it is refused, and no other process can take it."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{bound.getsockname()[1]}"


class SilentServer:
    """Accepts connections and never answers (a registry that hung); stops by itself after `lifetime_s`."""

    def __init__(self, lifetime_s: float = 60) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.stopped = threading.Event()
        self.deadline = time.monotonic() + lifetime_s
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set() and time.monotonic() < self.deadline:
            try:
                self.accepted.append(self.listener.accept()[0])
            except TimeoutError:
                pass

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        for connection in self.accepted:
            connection.close()
        self.listener.close()


@pytest.fixture
def silent_server():
    server = SilentServer()
    yield server
    server.stop()


def _skopeo_children() -> set[int]:
    children = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/comm") as comm:
                    name = comm.read().strip()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and name == "skopeo":
                children.add(int(entry))
    return children


def _assert_unreachable(message: str, address: str) -> None:
    assert message.startswith(f"could not reach the registry for {address}/prebake-test:b: skopeo: "), message
    assert "connection refused" in message
    assert "The registry could not be reached: check its address (--registry / PREBAKE_REGISTRY) and network." \
        in message
    assert "refused" not in message.split(": skopeo:")[0] and "credentials" not in message
    assert PASSWORD not in message


def test_an_unreachable_registry_is_not_called_a_credentials_problem(refusing_address):
    with pytest.raises(PrebakeError) as failed:
        skopeo.tag_in_registry(f"{refusing_address}/prebake-test:a", DIGEST, f"{refusing_address}/prebake-test:b",
                               AUTH)
    _assert_unreachable(str(failed.value), refusing_address)


@pytest.mark.docker
def test_a_push_from_the_engine_to_an_unreachable_registry_says_so(refusing_address, engine_image):
    with pytest.raises(PrebakeError) as failed:
        skopeo.push_from_engine(engine_image, f"{refusing_address}/prebake-test:b", AUTH)
    _assert_unreachable(str(failed.value), refusing_address)


def test_a_registry_that_never_answers_is_given_up_on_and_skopeo_killed(silent_server, monkeypatch):
    monkeypatch.setenv("PREBAKE_PUSH_TIMEOUT_S", "2")
    address = silent_server.address
    started = time.monotonic()
    with pytest.raises(PrebakeError) as failed:
        skopeo.tag_in_registry(f"{address}/prebake-test:a", DIGEST, f"{address}/prebake-test:b", AUTH)
    waited = time.monotonic() - started
    message = str(failed.value)
    assert message.startswith(f"pushing {address}/prebake-test:b: the registry sent nothing for 2 s"), message
    assert "set PREBAKE_PUSH_TIMEOUT_S to wait longer" in message and PASSWORD not in message
    assert silent_server.accepted, "skopeo never reached the silent registry: the test proved nothing"
    assert 2 <= waited < 10
    assert not _skopeo_children()


@pytest.mark.docker
def test_a_push_from_the_engine_to_a_registry_that_never_answers_is_given_up_on(silent_server, monkeypatch,
                                                                                engine_image):
    monkeypatch.setenv("PREBAKE_PUSH_TIMEOUT_S", "2")
    address = silent_server.address
    started = time.monotonic()
    with pytest.raises(PrebakeError) as failed:
        skopeo.push_from_engine(engine_image, f"{address}/prebake-test:b", AUTH)
    message = str(failed.value)
    assert message.startswith(f"pushing {address}/prebake-test:b: the registry sent nothing for 2 s"), message
    assert silent_server.accepted, "skopeo was stopped before it reached the registry"
    assert time.monotonic() - started < 10
    assert not _skopeo_children()


# The watch itself, on a process that stays silent on its outputs: skopeo uploading one large blob does that
# (here at 160 KB/s, a slow upload), or skopeo waiting on a hung registry, where only the Go runtime's
# wake-ups move a couple of bytes now and then.
def _writes_silently(chunk: int, every_s: float) -> str:
    return ("import time\nend = time.monotonic() + 3\nwith open('/dev/null', 'wb', buffering=0) as sink:\n"
            f"    while time.monotonic() < end:\n        sink.write(b'x' * {chunk}); time.sleep({every_s})\n")


_MOVES_BYTES_SILENTLY = _writes_silently(8192, 0.05)


def test_bytes_moving_count_as_life_though_nothing_is_printed():
    started = time.monotonic()
    assert skopeo._run([sys.executable, "-c", _MOVES_BYTES_SILENTLY], 1)[0] == 0
    assert time.monotonic() - started >= 3


def test_a_runtimes_wake_ups_are_not_life():
    started = time.monotonic()
    assert skopeo._run([sys.executable, "-c", _writes_silently(2, 0.5)], 1)[0] is None
    assert time.monotonic() - started < 2.5


def test_no_output_and_no_bytes_moving_is_silence():
    started = time.monotonic()
    assert skopeo._run([sys.executable, "-c", "import time; time.sleep(30)"], 1)[0] is None
    assert time.monotonic() - started < 5


@pytest.fixture(scope="module")
def engine_image():
    """A one-file image in the local engine (a few bytes to read, unlike any real base), removed afterwards."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as e:
        pytest.fail(f"this test needs a running Docker Engine (.ci/run starts one): {e}", pytrace=False)
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        data = b"prebake skopeo test\n"
        member = tarfile.TarInfo("hello.txt")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    client.api.import_image_from_data(layer.getvalue(), repository=ENGINE_IMAGE.split(":")[0],
                                      tag=ENGINE_IMAGE.split(":")[1])
    yield ENGINE_IMAGE
    client.images.remove(ENGINE_IMAGE, force=True)
