"""The keep-alive bridge in the built test image: the launcher starts the stand-in vLLM and the bridge as
it would start vLLM, requests are relayed with heartbeats, `docker stop` ends both, a killed bridge
ends the container. Everything talks over the container's loopback (`docker exec`), no network."""

import json
import re
import time

import pytest

from prebake_testing.engine import image_with_files
from prebake_testing.hosts import fake_nvidia_smi_for_image
from prebake_testing.servers import STANDIN

pytestmark = pytest.mark.docker

# `vllm` in the image: the stand-in vLLM server, started with the launcher's argv (it reads --host/--port).
SHIM = "#!/bin/sh\nexec /opt/venv/bin/python /opt/standin/standin.py \"$@\"\n"

# Run inside the container: one streaming request through the bridge on 8080, printed as JSON.
CLIENT = r'''
import http.client, json, sys, time
deadline = time.monotonic() + 30
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
        c.request("GET", "/health")
        if c.getresponse().status == 200:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("the bridge never became ready")
    time.sleep(0.2)
c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
c.request("POST", "/v1/messages", body=json.dumps({"model": "ornith", "stream": True, "max_tokens": 8}),
          headers={"content-type": "application/json", "x-standin-delay": "1.3"})
r = c.getresponse()
print(json.dumps({"status": r.status, "body": r.read().decode()}))
'''


@pytest.fixture(scope="module")
def bridge_image(client, tiny):
    return image_with_files(client, tiny["image"], {"/opt/standin/standin.py": (STANDIN.read_bytes(), 0o644),
                                                    "/opt/venv/bin/vllm": (SHIM.encode(), 0o755)},
                            "prebake-test:bridge-stand-in")


@pytest.fixture
def running(client, bridge_image, tmp_path):
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    container = client.containers.run(bridge_image, detach=True, network_disabled=True,
                                      environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi", "VL_HEARTBEAT": "0.5"},
                                      volumes={str(fake): {"bind": "/opt/fake", "mode": "ro"}})
    yield container
    container.remove(force=True)


def processes(container) -> dict[str, tuple[int, int]]:
    """command line -> (pid, parent pid), read from /proc inside the container."""
    script = ("import os, json; print(json.dumps({open(f'/proc/{p}/cmdline','rb').read().replace(b'\\0', b' ')"
              ".decode(): (int(p), int(open(f'/proc/{p}/stat').read().split(')')[1].split()[1])) "
              "for p in os.listdir('/proc') if p.isdigit()}))")
    code, out = container.exec_run(["/opt/venv/bin/python", "-c", script])
    assert code == 0, out
    return json.loads(out)


def find(table: dict, start: str) -> tuple[int, int]:
    found = [v for k, v in table.items() if k.startswith(start)]
    assert found, (start, table)
    return found[0]


def test_the_image_relays_through_the_bridge_and_docker_stop_ends_both(running):
    code, out = running.exec_run(["/opt/venv/bin/python", "-c", CLIENT])
    assert code == 0, out.decode() + running.logs().decode()
    answer = json.loads(out)
    assert answer["status"] == 200
    assert answer["body"].startswith('event: ping\ndata: {"type":"ping"}\n\n' * 2)
    assert answer["body"].endswith('event: message_stop\ndata: {"type":"message_stop"}\n\n')

    # The status page, from the image itself: its identity and phase (no key on this pod: no log lines).
    code, out = running.exec_run(["/opt/venv/bin/python", "-c", "import urllib.request; print(urllib.request."
                                  "urlopen('http://127.0.0.1:8080/prebake/status').read().decode())"])
    assert code == 0, out
    status = json.loads(out)
    assert status["phase"] == "serving" and status["image"]["revision"] == "itest01" and "log" not in status

    table = processes(running)
    assert find(table, "/usr/bin/tini")[0] == 1  # tini stays PID 1
    launcher = find(table, "/opt/venv/bin/python /opt/prebake/entrypoint/launch.py")
    assert launcher[1] == 1
    assert find(table, "/opt/venv/bin/python /opt/standin/standin.py")[1] == launcher[0]  # vLLM and the bridge: the launcher's children
    assert find(table, "/opt/venv/bin/python /opt/prebake/entrypoint/bridge.py --port 8080 --upstream http://127.0.0.1:18081")[1] == launcher[0]

    began = time.monotonic()
    running.stop(timeout=20)
    assert time.monotonic() - began < 10, "docker stop needed SIGKILL: a child ignored SIGTERM"
    logs = running.logs().decode()
    assert running.wait()["StatusCode"] == 143, logs  # the stand-in's own exit (uvicorn re-raises SIGTERM)
    assert "vLLM exited with signal SIGTERM; stopping the keep-alive bridge" in logs
    # The first line names the image (the tiny image has no vLLM: "?"), every launcher line is stamped.
    assert re.match(r"\S+Z \[prebake\] image prebake tiny, revision itest01, vLLM \?, CUDA 13\.0, ", logs), logs[:500]


def test_a_killed_bridge_ends_the_container(running):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        table = processes(running)
        if any("bridge.py" in k for k in table) and any("standin.py" in k for k in table):
            break
        time.sleep(0.2)
    bridge_pid = find(processes(running), "/opt/venv/bin/python /opt/prebake/entrypoint/bridge.py")[0]
    code, out = running.exec_run(["/opt/venv/bin/python", "-c", f"import os; os.kill({bridge_pid}, 9)"])
    assert code == 0, out
    assert running.wait(timeout=40)["StatusCode"] == 5
    logs = running.logs().decode()
    assert "the keep-alive bridge on port 8080 exited with signal SIGKILL" in logs
