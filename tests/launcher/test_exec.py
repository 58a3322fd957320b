"""Without --dry-run the launcher really execs `vllm` with exactly the dry-run argv and env."""

import json
import os
import socket
import stat

import pytest

from prebake_testing.hosts import exec_ports


def stand_in_vllm(folder, record):
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'env': dict(os.environ), 'pid': os.getpid()}}, open({str(record)!r}, 'w'))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def test_exec_receives_the_dry_run_argv_and_env(launcher, tmp_path):
    record = tmp_path / "vllm-call.json"
    bin_dir = stand_in_vllm(tmp_path / "venv-bin", record)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LD_LIBRARY_PATH": "/usr/lib/x", **exec_ports()}
    args = ["--max-num-seqs", "12"]
    planned = launcher.plan("a40x2_570", env=env, args=args)
    ran = launcher.run("a40x2_570", env=env, args=args, dry_run=False)
    assert ran.rc == 0, ran.stderr
    call = json.loads(record.read_text())
    assert [os.path.basename(call["argv"][0])] + call["argv"][1:] == planned.argv
    for name, value in planned.env.items():
        assert call["env"].get(name) == value, name
    assert call["env"]["LD_LIBRARY_PATH"] == f"{launcher.compat_dir}:/usr/lib/x"
    assert ran.stdout == ""  # decisions go to stderr
    assert "compat: on" in ran.stderr


def test_exec_refuses_a_port_in_use(launcher, tmp_path):
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        result = launcher.run("h200_580", env={**exec_ports(), "VL_PORT": str(port)}, dry_run=False)
    assert result.rc == 3 and "VL_PORT" in result.stderr and "already in use" in result.stderr


def test_exec_without_vllm_is_a_clear_error(launcher, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = launcher.run("h200_580", env={"PATH": str(empty), **exec_ports()}, dry_run=False)
    assert result.rc == 3 and "/opt/venv/bin/vllm" in result.stderr


def test_exec_checks_the_port_given_as_container_argument(launcher):
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        result = launcher.run("h200_580", env=exec_ports(), args=[f"--port={port}"], dry_run=False)
    assert result.rc == 3 and f"port {port}" in result.stderr


@pytest.mark.parametrize("bridge", ["keepalive", "off"])
def test_runpods_key_never_reaches_vllms_environment(launcher, tmp_path, bridge):
    """RUNPOD_API_KEY (RunPod gives every pod one) is the idle stop's, in the bridge only: vLLM runs models' own code
    (--trust-remote-code) and is started, or exec'd with VL_BRIDGE=off, without it."""
    record = tmp_path / "vllm-call.json"
    bin_dir = stand_in_vllm(tmp_path / "venv-bin", record)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", **exec_ports(), "VL_BRIDGE": bridge,
           "RUNPOD_API_KEY": "rpa_podscoped_secret_123", "RUNPOD_POD_ID": "pod123", "VLLM_API_KEY": "pod-key-456"}
    ran = launcher.run("h200_580", env=env, dry_run=False)
    assert ran.rc == 0, ran.stderr
    call = json.loads(record.read_text())
    assert "RUNPOD_API_KEY" not in call["env"] and call["env"]["RUNPOD_POD_ID"] == "pod123"
    assert ("VLLM_API_KEY" in call["env"]) == (bridge == "off")  # behind the bridge vLLM checks no key
