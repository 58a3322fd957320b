"""What a hostile but fair user tried (issue 10): every input ends in a plan or a clear error, exit 2-4.

Each case runs the launcher's real command line (prebake_testing.hosts.Launcher) against the fake nvidia-smi.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from prebake_testing.hfcache import ORNITH, cache_repo, sharded_weights
from prebake_testing.hosts import A40, assert_clear_error, custom_host, write_marker
from prebake_testing.net import wait_until


# --- security: no option injected through a knob ---------------------------------------------------

@pytest.mark.parametrize("aliases", ["--model evil/model", "--trust-remote-code", "ok -q awq", "a --port=1"])
def test_aliases_cannot_inject_options(launcher, aliases):
    result = launcher.run("h200_580", env={"VL_ALIASES": aliases})
    assert_clear_error(result, 2, "VL_ALIASES", "accepted values")


@pytest.mark.parametrize("model", ["owner/--model", "a/-q", "-a/b", "a/b--c", "ównér/model"])
def test_model_repo_id_cannot_become_an_option(launcher, model):
    # the served name is the repo's name: "a/-q" would have put "-q" (--quantization) into argv
    assert_clear_error(launcher.run("h200_580", env={"VL_MODEL": model}), 2, "VL_MODEL")


def test_aliases_keep_working(launcher):
    result = launcher.plan("h200_580", env={"VL_ALIASES": "gpt-4o claude-opus-5[1m] my.model:v2 org/name"})
    assert result.option("--served-model-name")[-4:] == ["gpt-4o", "claude-opus-5[1m]", "my.model:v2", "org/name"]


# --- numbers: finite, in range ---------------------------------------------------------------------

@pytest.mark.parametrize("name,value", [
    ("VL_YARN_FACTOR", "inf"), ("VL_YARN_FACTOR", "nan"), ("VL_YARN_FACTOR", "1e10"), ("VL_YARN_FACTOR", "1e400"),
    ("VL_YARN_FACTOR", "65"), ("VL_OFFLOAD", "inf"), ("VL_OFFLOAD", "1e6"), ("VL_OFFLOAD", "-1"),
    ("VL_OFFLOAD", "1_0"), ("VL_UTIL", "nan"), ("VL_UTIL", "1e-9"), ("VL_SEQS", "9" * 5000),
    ("VL_CTX", "99999999999"), ("VL_TP", "٣"), ("VL_PORT", "0"),
], ids=lambda value: value if len(value) < 20 else f"{value[:5]}...x{len(value)}")
def test_non_finite_or_out_of_range_numbers_are_refused(launcher, name, value):
    assert_clear_error(launcher.run("h200_580", env={name: value}), 2, name, "accepted values")


def test_reasonable_numbers_still_pass(launcher):
    result = launcher.plan("h200_580", env={"VL_OFFLOAD": "64", "VL_UTIL": ".9", "VL_MODEL": "dense",
                                            "VL_YARN_FACTOR": "4"})
    assert result.option("--kv-offloading-size") == ["64"]
    assert result.option("--gpu-memory-utilization") == [".9"] or result.option("--gpu-memory-utilization") == ["0.9"]


def test_lookup_min_above_max_is_refused(launcher):
    result = launcher.run("h200_580", env={"VL_LOOK_MIN": "20", "VL_LOOK_MAX": "4"})
    assert_clear_error(result, 2, "VL_LOOK_MIN=20", "VL_LOOK_MAX=4")


def test_numa_nodes_must_cover_the_gpus(launcher):
    more = launcher.run("a40x1_580", env={"VL_NUMA": "on", "VL_NUMA_NODES": "0 1"})
    assert_clear_error(more, 2, "VL_NUMA_NODES", "1 GPU")
    fewer = launcher.run("a40x2_570", env={"VL_NUMA": "on", "VL_NUMA_NODES": "0"})  # TP 2: GPU index 1 has none
    assert_clear_error(fewer, 2, "VL_NUMA_NODES", "2 GPUs")
    # one per visible GPU, even when vLLM uses fewer (vLLM's own documented form)
    assert launcher.plan("a40x2_570", env={"VL_NUMA": "on", "VL_TP": "1"}).option("--numa-bind-nodes") == ["0", "1"]
    assert launcher.plan("a40x2_570", env={"VL_NUMA": "on"}).option("--numa-bind-nodes") == ["0", "1"]
    # off: the default "0 1" on a one-GPU host is never used, so never refused
    assert launcher.run("a40x1_580").rc == 0


# --- container arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["--MODEL", "x/y"], "VL_MODEL"),
    (["--Model=x/y"], "VL_MODEL"),
    (["--Max-Num-Seqs", "8"], "lower case"),
    (["--max-num-seqs", "8", "Qwen/Qwen3-8B"], "VL_MODEL"),
    (["--enable-prefix-caching", "Qwen/Qwen3-8B"], "VL_MODEL"),
    (["--port=9000", "Qwen/Qwen3-8B"], "VL_MODEL"),
    (["--port", "99999"], "--port"),
    (["--port", "0"], "--port"),
    (["--port=abc"], "--port"),
    (["--port"], "--port"),
])
def test_container_arguments_vllm_would_refuse_later(launcher, args, needle):
    assert_clear_error(launcher.run("h200_580", args=args), 2, needle)


def test_port_out_of_range_at_a_real_start(launcher):
    # was: OverflowError from bind() after the plan, a traceback
    result = launcher.run("h200_580", args=["--port", "99999"], dry_run=False)
    assert_clear_error(result, 2, "--port", "1-65535")


def test_options_with_several_values_still_pass(launcher):
    args = ["--served-model-name", "a", "b", "--max-num-seqs", "4", "--numa-bind-nodes", "0", "1"]
    assert launcher.plan("h200_580", args=args).argv[-len(args):] == args


# --- the host probe --------------------------------------------------------------------------------

def test_nvidia_smi_printing_non_utf8_bytes(launcher):
    smi = custom_host(launcher, [{**A40, "name": "NVIDIA A40\udcff\udcfe"}])
    result = launcher.run("a40x1_580", env={"VL_NVIDIA_SMI": smi})
    assert result.rc in (0, 3) and "Traceback" not in result.stderr, result.stderr
    bad_memory = custom_host(launcher, [{**A40, "memory_total_mib": "4\udcff"}])
    assert_clear_error(launcher.run("a40x1_580", env={"VL_NVIDIA_SMI": bad_memory}), 3, "nvidia-smi")


@pytest.mark.parametrize("gpus,needle", [
    ([{**A40, "memory_total_mib": 0}], "MiB"),
    ([{**A40, "memory_total_mib": -46068}], "MiB"),
    ([{**A40, "index": 0}, {**A40, "index": 0}], "index 0"),
    ([{**A40, "compute_cap": "-8.6"}], "compute_cap"),
    ([{**A40, "index": "٣"}], "nvidia-smi"),
])
def test_nvidia_smi_nonsense_is_a_host_error(launcher, gpus, needle):
    result = launcher.run("a40x1_580", env={"VL_NVIDIA_SMI": custom_host(launcher, gpus)})
    assert_clear_error(result, 3, needle)


def test_nvidia_smi_time_out_kills_its_children(tmp_path, monkeypatch):
    from entrypoint.launcher import probe
    from entrypoint.launcher.report import LaunchError

    child_pid = tmp_path / "child.pid"
    smi = tmp_path / "nvidia-smi"
    # a wedged driver: nvidia-smi's own child hangs too (the shell is its parent, not exec'd)
    smi.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > '{child_pid}'\nwait\n")
    smi.chmod(0o755)
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(LaunchError) as error:
        probe.probe_host({"VL_NVIDIA_SMI": str(smi), "PATH": os.environ["PATH"]})
    assert error.value.exit_code == 3 and "did not answer within" in str(error.value)
    assert time.monotonic() - started < 10
    pid = int(child_pid.read_text())

    def gone() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    try:
        wait_until(gone, 5, f"nvidia-smi's child {pid} gone")  # SIGKILL is asynchronous: the kernel's moment
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"nvidia-smi's child {pid} survived the time-out")


# --- the HF cache on the volume --------------------------------------------------------------------

def corrupt_index(launcher, index_text: str | bytes, shards: int = 2) -> None:
    files = sharded_weights(shards)
    files["model.safetensors.index.json"] = "placeholder"
    cache_repo(launcher.hf_home / "hub", ORNITH, files)
    snapshot = next((launcher.hf_home / "hub").glob("models--*/snapshots/*"))
    target = (snapshot / "model.safetensors.index.json").resolve()
    target.write_bytes(index_text if isinstance(index_text, bytes) else index_text.encode())


@pytest.mark.parametrize("index", [
    json.dumps({"weight_map": ["model-00001-of-00002.safetensors"]}),
    json.dumps({"weight_map": {"a": 1, "b": "model-00001-of-00002.safetensors"}}),
    json.dumps({"weight_map": {"a": ["x"]}}),
    json.dumps({"weight_map": {"a": "../../../../../etc/passwd"}}),
    json.dumps({"weight_map": {"a": "/etc/passwd"}}),
    json.dumps({"weight_map": {}}),
    json.dumps(["weight_map"]),
    "[" * 100000,
    b"\xff\xfe{}",
], ids=["list", "int-value", "list-value", "dot-dot", "absolute", "empty", "top-list", "deep", "not-utf8"])
def test_corrupt_index_means_not_cached_with_a_decision(launcher, index):
    corrupt_index(launcher, index)
    result = launcher.plan("h200_580")
    assert "HF_HUB_OFFLINE" not in result.env
    why = result.decision("hf-offline")[0]["why"]
    assert "model.safetensors.index.json" in why and "delete" in why, why


def test_garbage_refs_main_means_not_cached(launcher):
    cache_repo(launcher.hf_home / "hub", ORNITH, sharded_weights(1))
    ref = next((launcher.hf_home / "hub").glob("models--*/refs/main"))
    for content in (b"\xff\xfe", b"../../..", b""):
        ref.write_bytes(content)
        result = launcher.plan("h200_580")
        assert "HF_HUB_OFFLINE" not in result.env, content


# --- markers ---------------------------------------------------------------------------------------

def test_deeply_nested_marker_is_a_marker_error(launcher):
    launcher.marker.write_text("[" * 100000)
    assert_clear_error(launcher.run("h200_580"), 4, str(launcher.marker))


def test_marker_launch_defaults_cannot_inject_options(launcher):
    write_marker(launcher.marker, str(launcher.compat_dir), {"VL_ALIASES": "--trust-remote-code"})
    assert_clear_error(launcher.run("h200_580"), 2, "VL_ALIASES", "launch_defaults")


def test_unexpected_failure_is_one_line_not_a_traceback(monkeypatch, capsys):
    # a launcher bug must still end in one line naming where it happened, with exit 1
    # (distinct from 2-4: not the user's fault)
    from entrypoint.launcher import main as launch

    def broken(env, user_args):
        raise KeyError("boom")

    monkeypatch.setattr(launch, "make_launch", broken)
    assert launch.main(["--dry-run"], environ={}) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "launcher bug" in err and "KeyError" in err and "test_hostile_inputs.py:" in err


# --- round 6 (issue 56): a dotted key where vLLM wants a plain value ------------------------------------------------

@pytest.mark.parametrize("args", [["--host.x", "0.0.0.0"], ["--api-key.x", "k"], ["--port.x=9000"], ["--api_key.a.b", "k"]])
def test_a_dotted_key_of_host_port_or_api_key_is_refused(launcher, args):
    """vLLM would read `--host.x 0.0.0.0` as the host '{"x": "0.0.0.0"}' (its dotted keys make JSON): refused, named."""
    written = args[0].split("=")[0]
    assert_clear_error(launcher.run("h200_580", args=args), 2, written, "plain value")
