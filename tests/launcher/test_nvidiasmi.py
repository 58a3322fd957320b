"""One nvidia-smi reader for both processes: the launcher's probe, the swap's memory wait, the status page."""

import asyncio
import time

from entrypoint import nvidiasmi
from entrypoint.launcher import probe
from entrypoint.launcher.swap import control
from entrypoint.serving import gpus

# An nvidia-smi that answers at once but leaves a child behind holding its output (a wedged driver's helper).
LINGERING = """#!/bin/sh
sleep 30 &
case "$1" in
  --query-gpu=memory.used) echo "1024"; echo "0" ;;
  --query-gpu=index,name,memory.used,memory.total) echo "0, NVIDIA H200, 1024, 143771" ;;
  *) echo "0, NVIDIA H200, 143771, 580.159.04, 9.0" ;;
esac
"""


def _script(tmp_path, text):
    path = tmp_path / "nvidia-smi"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_every_reader_answers_when_nvidia_smi_leaves_a_child_holding_its_output(tmp_path):
    smi = _script(tmp_path, LINGERING)
    began = time.monotonic()
    assert control.memory_used_mib(smi, {"PATH": "/usr/bin:/bin"}) == [1024, 0]
    assert asyncio.run(gpus.query(smi)) == ([{"index": 0, "name": "NVIDIA H200", "memory_used_mib": 1024,
                                              "memory_total_mib": 143771}], None)
    host = probe.probe_host({"PATH": "/usr/bin:/bin", "VL_NVIDIA_SMI": smi})
    assert [gpu.memory_mib for gpu in host.gpus] == [143771]
    assert time.monotonic() - began < 5  # the child's 30 s held a pipe reader (subprocess.run, communicate) till EOF


def test_a_reader_that_must_not_fail_says_why(tmp_path):
    assert nvidiasmi.query(str(tmp_path / "missing"), ("memory.used",), None, 1.0)[1].startswith("cannot run ")
    failing = _script(tmp_path, "#!/bin/sh\necho 'driver gone' >&2\nexit 9\n")
    assert nvidiasmi.query(failing, ("memory.used",), None, 1.0) == ([], f"{failing} exited with 9: driver gone")
    hung = _script(tmp_path, "#!/bin/sh\nsleep 30\n")
    assert nvidiasmi.query(hung, ("memory.used",), None, 0.5) == ([], f"{hung} did not answer within 0.5 s")


def test_memory_readings_that_are_not_numbers_are_no_reading(tmp_path):
    smi = _script(tmp_path, "#!/bin/sh\necho 1024\necho '[N/A]'\n")
    assert control.memory_used_mib(smi, {}) is None
