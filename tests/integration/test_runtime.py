"""The image at run time: the launcher decides from a fake host, tini forwards docker stop to vLLM."""

import json
import time

import docker
import pytest

from prebake_testing.engine import image_with_files
from prebake_testing.hosts import fake_nvidia_smi_for_image

pytestmark = pytest.mark.docker

STAND_IN_VLLM = r'''#!/opt/venv/bin/python
"""Stand-in for vllm: records how it was started, then waits for SIGTERM like a server."""
import json, os, signal, sys, time
with open("/tmp/vllm-started.json", "w") as f:
    json.dump({"argv": ["vllm", *sys.argv[1:]], "pid": os.getpid(), "ppid": os.getppid(),
               "env": {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "HF_", "LD_", "NCCL"))}}, f)
def stop(signum, frame):
    print("stand-in vllm: SIGTERM, exiting", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(1)
'''


@pytest.fixture(scope="module")
def stand_in_image(client, tiny):
    """The tiny image with a stand-in `vllm` on PATH: it replaces vLLM, never the launcher's decisions."""
    return image_with_files(client, tiny["image"], {"/opt/venv/bin/vllm": (STAND_IN_VLLM.encode(), 0o755)},
                            "prebake-test:stand-in-vllm")


def _volumes(folder):
    return {str(folder): {"bind": "/opt/fake", "mode": "ro"}}


def test_launcher_dry_run_in_the_image(client, tiny, tmp_path):
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    output = client.containers.run(tiny["image"], command=["--dry-run"], remove=True, network_disabled=True,
                                   environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi"}, volumes=_volumes(fake))
    plan = json.loads(output)
    assert plan["argv"][:2] == ["vllm", "serve"]
    assert "--tensor-parallel-size" in plan["argv"]
    assert plan["argv"][plan["argv"].index("--tensor-parallel-size") + 1] == "1"
    assert plan["decisions"]


def test_old_driver_without_baked_compat_is_refused(client, tiny, tmp_path):
    # The tiny image is built --without cuda-compat: on a 570 driver the launcher must refuse, not start.
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x2_570")
    with pytest.raises(docker.errors.ContainerError) as error:
        client.containers.run(tiny["image"], command=["--dry-run"], remove=True, network_disabled=True,
                              environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi"}, volumes=_volumes(fake))
    assert b"was built without them" in error.value.stderr and b"580" in error.value.stderr


def test_docker_stop_reaches_vllm_through_tini(client, stand_in_image, tmp_path):
    # VL_BRIDGE=off: the launcher execs vLLM (test_bridge_container.py covers the bridge's process model).
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    env = {"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi", "VL_BRIDGE": "off"}
    dry = json.loads(client.containers.run(stand_in_image, command=["--dry-run", "--max-num-seqs", "7"], remove=True,
                                           network_disabled=True, environment=env, volumes=_volumes(fake)))
    container = client.containers.run(stand_in_image, command=["--max-num-seqs", "7"], detach=True,
                                      network_disabled=True, environment=env, volumes=_volumes(fake))
    try:
        started = None
        for _ in range(100):
            code, out = container.exec_run(["cat", "/tmp/vllm-started.json"])
            if code == 0:
                started = json.loads(out)
                break
            time.sleep(0.1)
        assert started, container.logs().decode()
        assert started["argv"] == dry["argv"]  # exactly what --dry-run promised
        assert started["ppid"] == 1  # the launcher exec'd into vllm: tini (PID 1) is its parent
        _, comm = container.exec_run(["cat", "/proc/1/comm"])
        assert comm.decode().strip() == "tini"
        begin = time.monotonic()
        container.stop(timeout=20)
        stopped_in = time.monotonic() - begin
        assert stopped_in < 10, f"docker stop took {stopped_in:.1f}s: SIGTERM did not reach vllm"
        assert container.wait()["StatusCode"] == 0
        assert "stand-in vllm: SIGTERM, exiting" in container.logs().decode()
    finally:
        container.remove(force=True)


def test_missing_marker_stops_the_launcher(client, tiny, tmp_path):
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    with pytest.raises(docker.errors.ContainerError) as error:
        client.containers.run(tiny["image"], command=["--dry-run"], remove=True, network_disabled=True,
                              environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi",
                                           "VL_PREBAKED_MARKER": "/nonexistent"},
                              volumes=_volumes(fake))
    assert b"not prebaked" in error.value.stderr
