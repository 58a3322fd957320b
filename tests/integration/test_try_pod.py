"""`./build.py try`: the real image on a machine without a GPU, the stand-in engine in place of vLLM, run as a
newcomer runs it from the quickstart: its page opens in a browser's terms, the block it prints connects the real
Claude Code, whose answer says plainly that no model is behind the pod; `docker stop` leaves nothing behind. On the
tiny test image (built as the other integration tests build it) and on the a40 image where it was built here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from prebake import trypod
from prebake_testing import claudecli
from prebake_testing.buildpy import REPO
from prebake_testing.net import free_port, request, wait_until

pytestmark = pytest.mark.docker
KEY = "try-pod-key-5e1d"


@pytest.fixture(params=["tiny", "a40"])
def image(request) -> str:
    """The tiny test image, built as the integration tests build it; the a40 image where it is built here (a skip
    elsewhere: the `a40` fixture)."""
    return request.getfixturevalue("tiny")["image"] if request.param == "tiny" else request.getfixturevalue("a40")


def try_command(*args: str, key: str | None = KEY) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name != "VLLM_API_KEY"}
    if key is not None:
        env["VLLM_API_KEY"] = key
    return subprocess.run([sys.executable, str(REPO / "build.py"), "try", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_pod_without_a_gpu_serves_its_page_and_claude_code_through_the_block(client, image, tmp_path):
    port = free_port()
    done = try_command("--image", image, "--port", str(port))
    assert done.returncode == 0, done.stderr
    name = f"prebake-try-{port}"
    try:
        lines = done.stdout.splitlines()
        assert lines[1] == f"page:    http://localhost:{port}/ (open it in a browser)", done.stdout
        assert f"stop:    docker stop {name}" in lines
        block = done.stdout.split("\n\n", 1)[1]
        assert block.startswith("if [ -z") and block.endswith("fi\n"), block
        status, head, page = request(port, "GET", "/", None, {"accept": "text/html"})
        assert status == 200 and head["content-type"].startswith("text/html"), (status, head)
        assert b"<title>prebake pod: ornith (serving)</title>" in page and KEY.encode() not in page
        version = claudecli.versions()[-1]
        cli = claudecli.binary(version)
        if cli is None:
            pytest.skip(claudecli.install_hint(version))
        home = tmp_path / "home"
        home.mkdir()
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "POD": f"http://localhost:{port}",
               "VLLM_API_KEY": KEY, "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "CLI": cli}
        answered = subprocess.run(["bash", "-c", 'claude() { "$CLI" -p "say hi"; }\n' + block], env=env,
                                  capture_output=True, text=True, timeout=120)
        assert answered.returncode == 0 and trypod.SAY in " ".join(answered.stdout.split()), answered
    finally:
        client.containers.get(name).stop(timeout=20)
    # removed by the engine once stopped (auto-remove, a moment later): nothing left behind but the image. The
    # low-level list: the SDK's containers.list() inspects each container it found, and one removed between the two
    # calls raised NotFound (a clean-clone CI run, 2026-12-06)
    wait_until(lambda: not client.api.containers(all=True, filters={"name": name}), 30, f"{name} removed")


def test_without_the_key_or_the_image_it_says_what_to_do_and_starts_nothing(client, tmp_path):
    port = free_port()
    unset = try_command("--image", "prebake-test:no-such-image", "--port", str(port), key=None)
    assert unset.returncode != 0 and "VLLM_API_KEY is empty: export the key" in unset.stderr, unset
    missing = try_command("--image", "prebake-test:no-such-image", "--port", str(port))
    assert missing.returncode != 0 and "--image prebake-test:no-such-image: not in the local Docker Engine" \
        in missing.stderr, missing
    host = try_command("--image", "prebake-test:no-such-image", "--port", str(port), "--host", "nohost")
    assert host.returncode != 0 and "--host nohost: not a host profile; pick one of a40x1_580" in host.stderr, host
    assert not client.api.containers(all=True, filters={"label": trypod.LABEL})


def test_a_port_in_use_is_named_and_leaves_no_container(client, image):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = try_command("--image", image, "--port", str(port))
    assert done.returncode != 0 and "address already in use" in done.stderr and \
        "pass --port with a free one" in done.stderr, done
    assert not client.api.containers(all=True, filters={"label": trypod.LABEL})
