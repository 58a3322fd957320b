"""Every start-time cache under VL_CACHE_ROOT: the real launcher command line, and the table itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.launcher.caches import VOLUME, cache_root, decide_caches, load_caches, mount_points

CACHES = load_caches()
PATH_VARS = {c.variable: c.path for c in CACHES if c.path}
# A line of /proc/self/mountinfo as Docker writes it for `-v /data/pod:/workspace`.
WORKSPACE_MOUNT = "612 590 253:1 /data/pod /workspace rw,relatime - ext4 /dev/vda1 rw\n"
ROOT_ONLY = "590 500 0:52 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/x\n"


def test_the_table_covers_each_library_that_compiles_or_downloads_at_start():
    # The libraries docs/caches.md names as writing at start; a new one needs a row.
    expected = {"HF_HOME", "VLLM_CACHE_ROOT", "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
                "TRITON_CACHE_DIR",
                "FLASHINFER_WORKSPACE_BASE", "HUMMING_CACHE_DIR", "HUMMING_TMP_DIR", "CUTE_DSL_CACHE_DIR", "TVM_FFI_CACHE_DIR",
                "XDG_CACHE_HOME", "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE"}
    assert {c.variable for c in CACHES} == expected
    for cache in CACHES:
        assert bool(cache.path) != bool(cache.value), cache.variable  # a path under the root, or a literal
        assert bool(cache.library) == bool(cache.reads_in) == bool(cache.evidence), cache.variable
    paths = [c.path for c in CACHES if c.path]
    assert len(paths) == len(set(paths)), "two caches share a folder"


def test_flashinfers_autotune_results_go_where_the_compile_cache_archive_carries_them():
    from entrypoint.launcher.compilecache import ARCHIVE_TOP, UNKEYED_ENV
    assert PATH_VARS["VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR"].startswith(f"{PATH_VARS['VLLM_CACHE_ROOT']}/{ARCHIVE_TOP}/")
    assert "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR" in UNKEYED_ENV  # a location: vLLM's compile factors leave it out too


def test_documented_in_the_census():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "caches.md").read_text()
    assert [c.variable for c in CACHES if f"`{c.variable}`" not in doc] == []


def test_mountinfo_parsing_finds_the_volume(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(ROOT_ONLY + WORKSPACE_MOUNT)
    assert mount_points(str(info)) == {"/", "/workspace"}
    assert cache_root(None, str(info)) == (VOLUME, "/workspace is a mounted volume (VL_CACHE_ROOT unset)")
    info.write_text(ROOT_ONLY + r"7 1 0:5 / /work\040space rw - tmpfs t rw" + "\n")
    assert "/work space" in mount_points(str(info))  # octal escapes, as the kernel writes a space
    assert cache_root(None, str(info))[0] is None
    assert cache_root(None, str(tmp_path / "absent"))[0] is None  # no /proc: nothing moved


def test_user_set_variable_wins_and_is_reported(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(WORKSPACE_MOUNT)
    changes, decisions = decide_caches(None, {"TRITON_CACHE_DIR": "/mine"}, mountinfo=str(info))
    assert "TRITON_CACHE_DIR" not in changes
    assert changes["FLASHINFER_WORKSPACE_BASE"] == "/workspace/cache/flashinfer"
    assert changes["CUDA_CACHE_MAXSIZE"] == "4294967296"
    assert decisions[1].decision == "kept as set: TRITON_CACHE_DIR"


def test_dry_run_without_a_volume_moves_nothing(launcher):
    if VOLUME in mount_points():
        pytest.skip("this machine has a volume at /workspace")
    result = launcher.plan()
    assert not set(result.env) & set(PATH_VARS)
    assert result.decision("caches")[0]["decision"] == "not moved"


def test_dry_run_puts_every_cache_under_the_root(launcher, tmp_path):
    root = tmp_path / "volume"
    result = launcher.plan(env={"VL_CACHE_ROOT": str(root), "HF_HOME": ""})
    for variable, path in PATH_VARS.items():
        assert result.env[variable] == str(root / path), variable
    assert result.env["CUDA_CACHE_MAXSIZE"] == "4294967296"
    assert result.decision("caches")[0]["why"] == "VL_CACHE_ROOT"


def test_hf_offline_check_reads_the_moved_hf_home(launcher, tmp_path):
    # The weights on the volume are what makes the second start offline: the check must look there.
    root = tmp_path / "volume"
    result = launcher.plan(env={"VL_CACHE_ROOT": str(root), "HF_HOME": ""})
    assert str(root / "huggingface" / "hub") in result.decision("hf-offline")[0]["why"]


def test_a_set_variable_is_not_in_the_plan(launcher, tmp_path):
    result = launcher.plan(env={"VL_CACHE_ROOT": str(tmp_path / "v"), "VLLM_CACHE_ROOT": "/elsewhere"})
    assert "VLLM_CACHE_ROOT" not in result.env and "HF_HOME" not in result.env  # conftest sets HF_HOME
    assert "VLLM_CACHE_ROOT" in result.decision("caches")[1]["decision"]


def test_off_and_bad_values(launcher):
    assert not set(launcher.plan(env={"VL_CACHE_ROOT": "off"}).env) & set(PATH_VARS)
    bad = launcher.run(env={"VL_CACHE_ROOT": "workspace"})
    assert bad.rc == 2 and "VL_CACHE_ROOT='workspace' is not valid: accepted values are an absolute path, or off" in bad.stderr
