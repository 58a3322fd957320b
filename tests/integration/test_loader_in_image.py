"""In the built image: the container runtime's compat hook against the launcher's choice.

Inside the tiny image (its Python, tini-less here, and Debian's ldconfig and ld.so), the test
does what the toolkit's enable-cuda-compat and update-ldcache hooks do on a host whose driver
is older than the image's compat libraries (a 580.159.04 host, compat 590.44.01): host driver
libraries in the driver folder, /etc/ld.so.conf.d/00-compat-<uuid>.conf naming the compat
folder, ldconfig. A stand-in `vllm` then loads libcuda.so.1 with the real loader: started
directly it gets the compat copy, started by the launcher the host driver's. The launcher is
this checkout's (mounted over the image's), so that a concurrent rebuild of the shared tag
cannot change what is tested.
"""

import json

import pytest

from prebake_testing import REPO
from prebake_testing import loader_fixtures as fx
from prebake_testing.hosts import fake_nvidia_smi_for_image

pytestmark = [pytest.mark.docker, pytest.mark.skipif(not fx.have_tools(), reason="needs gcc to build the libraries")]

STAND_IN = """#!/opt/venv/bin/python
import ctypes, json
seen = {}
for name in ("libcuda.so.1", "libnvidia-ptxjitcompiler.so.1"):
    answer = ctypes.CDLL(name).prebake_libcuda
    answer.restype = ctypes.c_char_p
    seen[name] = answer().decode()
print("LOADED " + json.dumps(seen), flush=True)
"""

SCRIPT = r"""
set -e
mkdir -p /usr/local/cuda-13.0 /tmp/bin
cp -a /opt/fixture/compat /usr/local/cuda-13.0/compat
cp -a /opt/fixture/driver/. /usr/lib/x86_64-linux-gnu/
echo /usr/local/cuda-13.0/compat > /etc/ld.so.conf.d/00-compat-3f2c9c3e-8a0e-4bb5-9d55-4a3b2f6d1c7e.conf
/sbin/ldconfig
cp /opt/fixture/vllm /tmp/bin/vllm && chmod +x /tmp/bin/vllm
echo CONTROL; /tmp/bin/vllm
echo DRYRUN; /opt/venv/bin/python /opt/prebake/entrypoint/launch.py --dry-run
echo LAUNCH; exec /opt/venv/bin/python /opt/prebake/entrypoint/launch.py
"""


def test_launcher_beats_the_runtime_compat_hook_in_the_image(client, tiny, tmp_path):
    fixture = tmp_path / "fixture"
    fx.install_driver(fixture / "compat", "590.44.01", "compat-590.44.01")
    fx.install_driver(fixture / "driver", "580.159.04", "host-580.159.04")
    (fixture / "vllm").write_text(STAND_IN)
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "h200_580")
    output = client.containers.run(
        tiny["image"], entrypoint=["sh", "-c", SCRIPT], remove=True, network_disabled=True, user="root",
        environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi", "PATH": "/tmp/bin:/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "VL_PORT": "18140"},
        volumes={str(fixture): {"bind": "/opt/fixture", "mode": "ro"},
                 str(fake): {"bind": "/opt/fake", "mode": "ro"},
                 str(REPO / "entrypoint"): {"bind": "/opt/prebake/entrypoint", "mode": "ro"}},
        stderr=True).decode()
    control, rest = output.split("DRYRUN", 1)
    dry_text, launched = rest.split("LAUNCH", 1)
    assert json.loads(control.split("LOADED ", 1)[1].splitlines()[0])["libcuda.so.1"] == "compat-590.44.01:libcuda.so"
    dry = json.loads(dry_text[dry_text.index("{"):dry_text.rindex("}") + 1])
    loader = [d for d in dry["decisions"] if d["topic"] == "loader"]
    assert "CUDA compat libcuda 590.44.01" in loader[0]["decision"] and "00-compat-" in loader[0]["why"]
    assert dry["env"]["LD_LIBRARY_PATH"] == "/tmp/prebake-host-driver"
    loaded = json.loads(launched.split("LOADED ", 1)[1].splitlines()[0])
    assert loaded == {"libcuda.so.1": "host-580.159.04:libcuda.so",
                      "libnvidia-ptxjitcompiler.so.1": "host-580.159.04:libnvidia-ptxjitcompiler.so"}
