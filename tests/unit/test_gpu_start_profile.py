"""The GPU harness's view of vLLM's start (issue 54): procwatch finds vLLM's API server, not the bridge beside it,
and its engine core's start; profile_summary reads a real py-spy profile."""

import json
import os
import subprocess
import sys
import time

import pytest

from benchmarks.gpu import procwatch, profile_summary
from prebake_testing import REPO



def test_the_api_server_is_the_vllm_script_serving_not_a_command_line_with_the_word():
    assert procwatch.is_vllm_server(b"/opt/venv/bin/python3\0/opt/venv/bin/vllm\0serve\0tiny/qwen3\0--port\08000\0")
    assert procwatch.is_vllm_server(b"vllm\0serve\0m\0")
    # the bridge, started by the same launcher, says serve too (the profile used to attach to it)
    assert not procwatch.is_vllm_server(b"python3\0/app/entrypoint/bridge.py\0serve\0--port\08080\0")
    assert not procwatch.is_vllm_server(b"python3\0-c\0from multiprocessing.spawn import spawn_main\0")
    assert not procwatch.is_vllm_server(b"/opt/venv/bin/vllm\0bench\0serve\0")


@pytest.fixture
def pod_tree(tmp_path):
    """A launcher-shaped tree of real processes: a parent with a 'bridge' child and a 'vllm serve' child that starts
    a resource tracker and then an engine core once told to (a file appears)."""
    vllm = tmp_path / "bin" / "vllm"
    vllm.parent.mkdir()
    go = tmp_path / "go"
    vllm.write_text(f"""#!{sys.executable}
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "from multiprocessing.resource_tracker import main; import time; time.sleep(60)"])
while not os.path.exists({str(go)!r}):
    time.sleep(0.02)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
time.sleep(60)
""")
    vllm.chmod(0o755)
    launcher = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "bridge.py", "serve"])
subprocess.Popen([{str(vllm)!r}, "serve", "tiny/qwen3"])
time.sleep(60)
"""], start_new_session=True)
    yield launcher, go
    os.killpg(launcher.pid, 9)
    launcher.wait()


def test_the_watch_finds_the_api_server_and_the_engine_cores_start(pod_tree):
    launcher, go = pod_tree
    watch = procwatch.EngineCoreWatch(launcher.pid, deadline_s=30)
    watch.start()
    assert watch.found_server.wait(30) and watch.server is not None
    assert procwatch.is_vllm_server(procwatch.cmdline_of(watch.server))
    assert watch.engine_core is None  # only the resource tracker so far: not the engine core
    told = time.time()
    go.write_text("")
    watch.join(30)
    assert watch.engine_core is not None and b"resource_tracker" not in procwatch.cmdline_of(watch.engine_core)
    assert told - 1 <= watch.engine_core_started <= time.time() + 1


def test_the_profile_summary_of_a_real_py_spy_recording():
    recording = json.loads((REPO / "tests" / "fixtures" / "pyspy" / "spawn_child.speedscope.json").read_text())
    parent, child = profile_summary.summarise(recording)
    assert child["sampled_s"] == 0.8 and child["imports_s"] == 0.2 and child["triton_compile_s"] == 0.0
    assert child["first_2s_in_imports_s"] == 0.2 and "asyncio/__init__.py" in child["first_2s_modules"]
    assert parent["sampled_s"] == 0.0
