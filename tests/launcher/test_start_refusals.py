"""Values that parse but cannot work stop the launcher at start (exit 2, naming the variable); what
nvidia-smi prints besides its answer never stops a pod, and its time limit holds whatever it leaves behind."""

from __future__ import annotations

import os
import signal
import time

import pytest

from prebake_testing.hosts import FAKE_SMI
from prebake_testing.hosts import A40, assert_clear_error, custom_host


@pytest.mark.parametrize("value", ["0.1", "0.001", "0.4999"])
def test_a_heartbeat_that_would_flood_the_client_is_refused(launcher, value):
    assert_clear_error(launcher.run("a40x1_580", env={"VL_HEARTBEAT": value}), 2, f"VL_HEARTBEAT={value!r}",
                       "floods the client")


def test_the_smallest_heartbeat_is_accepted(launcher):
    assert launcher.plan("a40x1_580", env={"VL_HEARTBEAT": "0.5"}).plan["bridge"]["heartbeat_s"] == 0.5


def test_a_cache_root_that_is_a_file_is_refused(launcher, tmp_path):
    root = tmp_path / "volume"
    root.write_text("not a folder")
    assert_clear_error(launcher.run("a40x1_580", env={"VL_CACHE_ROOT": str(root)}), 2, "VL_CACHE_ROOT=",
                       "is not a folder")
    below = root / "caches"  # a path under a file cannot be created either
    assert_clear_error(launcher.run("a40x1_580", env={"VL_CACHE_ROOT": str(below)}), 2, "VL_CACHE_ROOT=")


def test_a_cache_root_read_only_or_unwritable_is_refused(tmp_path, monkeypatch):
    # In-process: the tests run as root, for whom only a read-only mount refuses a write.
    from entrypoint.launcher import caches
    from entrypoint.launcher.report import LaunchError

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(caches.os, "statvfs", lambda path: ReadOnly())
    with pytest.raises(LaunchError, match="read-only file system"):
        caches.check_root(str(tmp_path / "new"), "VL_CACHE_ROOT=/x")
    monkeypatch.undo()
    monkeypatch.setattr(caches.os, "access", lambda path, mode: False)
    with pytest.raises(LaunchError, match=r"cannot be created \(.* is not writable\)"):
        caches.check_root(str(tmp_path / "new"), "VL_CACHE_ROOT=/x")
    with pytest.raises(LaunchError, match="is not writable"):
        caches.check_root(str(tmp_path), "VL_CACHE_ROOT=/x")


def test_a_cache_root_to_create_is_accepted(launcher, tmp_path):
    assert launcher.plan("a40x1_580", env={"VL_CACHE_ROOT": str(tmp_path / "a" / "b")}).rc == 0


@pytest.mark.parametrize("args", [["--max-model-len"], ["--max-model-len", "--max-num-seqs", "4"],
                                  ["--max-num-seqs", "4", "--gpu-memory-utilization"], ["--served-model-name"],
                                  ["--kv-cache-dtype", "--enforce-eager"]])
def test_a_container_argument_without_its_value_is_refused(launcher, args):
    assert_clear_error(launcher.run("a40x1_580", args=args), 2, "needs a value")


def test_nvidia_smi_warnings_and_extra_lines_do_not_stop_a_pod(launcher):
    real = custom_host(launcher, [A40])
    noisy = launcher.tmp / "noisy-nvidia-smi"
    noisy.write_text("#!/bin/sh\necho 'WARNING: infoROM is corrupted at gpu 0000:41:00.0' >&2\n"
                     "echo 'Warning: persistence mode is disabled on device 00000000:41:00.0'\n"
                     f"'{real}' \"$@\"\necho\necho 'Some GPUs are not supported'\n")
    noisy.chmod(0o755)
    result = launcher.plan("a40x1_580", env={"VL_NVIDIA_SMI": str(noisy)})
    assert result.rc == 0 and "Traceback" not in result.stderr


def test_nvidia_smi_printing_only_other_lines_says_what_it_printed(launcher):
    smi = launcher.tmp / "confused-nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'No devices were found'\n")
    smi.chmod(0o755)
    assert_clear_error(launcher.run("a40x1_580", env={"VL_NVIDIA_SMI": str(smi)}), 3, "No devices were found")


def test_the_time_limit_holds_when_nvidia_smi_leaves_a_child_holding_its_output(tmp_path, monkeypatch):
    from entrypoint.launcher import probe

    child_pid = tmp_path / "child.pid"
    smi = tmp_path / "nvidia-smi"
    # The child leaves nvidia-smi's session and keeps its stdout and stderr open, then nvidia-smi answers.
    # It answers once the child has started (its pid file written), not after a guessed delay.
    smi.write_text(f"#!/bin/sh\nsetsid sh -c 'echo $$ > \"{child_pid}\"; exec sleep 300' &\n"
                   f"while [ ! -s '{child_pid}' ]; do sleep 0.01; done\n"
                   f"exec '{os.sys.executable}' -S '{FAKE_SMI}' \"$@\"\n")
    smi.chmod(0o755)
    profile = tmp_path / "host.json"
    profile.write_text('{"driver_version": "580.95.05", "gpus": [{"name": "NVIDIA A40", "memory_total_mib": 46068, '
                       '"compute_cap": "8.6"}]}')
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 3.0)
    began = time.monotonic()
    try:
        host = probe.probe_host({"VL_NVIDIA_SMI": str(smi), "PATH": os.environ["PATH"],
                                 "FAKE_NVIDIA_SMI_HOST": str(profile)})
    finally:
        try:
            os.kill(int(child_pid.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    assert time.monotonic() - began < 3 and host.gpus[0].name == "NVIDIA A40"
