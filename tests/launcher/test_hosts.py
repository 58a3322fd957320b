"""Host profiles x the default model: compat, parallelism, context tier, as the script decided."""

import json
import tomllib

import pytest

from prebake_testing.hosts import ROOT

CATALOGUE = tomllib.loads((ROOT / "entrypoint" / "models.toml").read_text())["models"]

# (profile, model, compat on, TP, context tier, YaRN factor or None)
# Context tiers follow the script's formula (VRAM x 0.90 - weights - 2000 MiB, KV bytes per
# token), with each model's own numbers; the comments give the script's own figures.
HOST_CASES = [
    # 2x A40 on 570: "~2.8 M tokens, the 1M fits largely" (bootstrap line 736)
    ("a40x2_570", "ornith", True, 2, 1_000_000, 4.0),
    # one A40: 41461 - 24883 - 2000 MiB -> 746 k tokens -> 524288 (the script: 689 k -> 524288)
    ("a40x1_580", "ornith", False, 1, 524_288, 4.0),
    # RTX 6000 Ada: "the automatic tier goes from 786432 to 1000000" with NVFP4 (line 694)
    ("rtx6000ada_550", "ornith", True, 1, 786_432, 4.0),
    ("rtx6000ada_550", "ornithnvfp4", True, 1, 1_000_000, 4.0),
    ("h200_580", "ornith", False, 1, 1_000_000, 4.0),
    # qwen: native 262144 and no YaRN in the script: never above it
    ("h200_580", "qwen", False, 1, 262_144, None),
    # Kimi-Linear: native 1M, no YaRN needed
    ("a40x2_570", "kimi", True, 2, 1_000_000, None),
    # Qwen3.8 dense: 794 k tokens of bf16 KV measured on 2x A40 (line 800), but one request of
    # 786432 needs 48 GiB + 1.79 GiB of state pages (measured at 262144, line 796): 524288
    ("a40x2_570", "dense", True, 2, 524_288, 4.0),
    # qwen38nvfp4: YaRN factor 2.0, ceiling 524288 (line 825)
    ("rtxpro6000_580", "qwen38nvfp4", False, 1, 524_288, 2.0),
    ("rtxpro6000_580", "nemotron", False, 1, 1_000_000, None),
]


@pytest.mark.parametrize("profile,model,compat,tp,ctx,yarn", HOST_CASES)
def test_host_profile_decisions(launcher, profile, model, compat, tp, ctx, yarn):
    result = launcher.plan(profile, env={"VL_MODEL": model})
    ld_path = result.env.get("LD_LIBRARY_PATH")
    if compat:
        assert ld_path == str(launcher.compat_dir)
        assert result.decision("compat")[0]["decision"].startswith("on")
    else:
        assert ld_path is None
        assert result.decision("compat")[0]["decision"] == "off"
    assert result.option("--tensor-parallel-size") == [str(tp)]
    assert result.option("--data-parallel-size") == ["1"]
    assert result.option("--max-model-len") == [str(ctx)]
    overrides = result.option("--hf-overrides")
    if yarn is None:
        assert overrides is None
        assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in result.env
    else:
        override = json.loads(overrides[0])
        # Qwen3.5's multimodal checkpoints keep their RoPE in text_config (issue 49: vLLM refuses it at the top)
        multimodal = CATALOGUE[model]["architecture"].endswith("ForConditionalGeneration")
        rope = override["text_config"]["rope_parameters"] if multimodal else override["rope_scaling"]
        assert rope == {"rope_type": "yarn", "factor": yarn, "original_max_position_embeddings": 262144}
        assert result.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
        assert ctx <= 262144 * yarn


def test_compat_keeps_existing_library_path_after_it(launcher):
    result = launcher.plan("a40x2_570", env={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"})
    assert result.env["LD_LIBRARY_PATH"] == f"{launcher.compat_dir}:/usr/local/nvidia/lib64"


def test_compat_never_on_new_driver_and_removed_if_present(launcher):
    result = launcher.plan("h200_580", env={"LD_LIBRARY_PATH": f"{launcher.compat_dir}:/usr/lib"})
    assert result.env["LD_LIBRARY_PATH"] == "/usr/lib"
    assert "removed" in result.decision("compat")[0]["decision"]


def test_geforce_on_old_driver_is_a_clear_error(launcher):
    result = launcher.run("rtx4090_550")
    assert result.rc == 3
    assert "must be 580 or newer" in result.stderr and "GeForce RTX 4090" in result.stderr
    assert result.stdout == ""


def test_geforce_on_new_driver_runs_without_compat(launcher):
    # Same card, driver 580: CUDA 13 runs natively, so a GeForce is fine.
    result = launcher.plan("rtx4090_580", env={"VL_MODEL": "qwen"})
    assert result.decision("compat")[0]["decision"] == "off" and "LD_LIBRARY_PATH" not in result.env


def test_compat_not_baked_is_a_clear_error(launcher, tmp_path):
    from prebake_testing.hosts import write_marker
    write_marker(launcher.marker, None)
    result = launcher.run("a40x2_570")
    assert result.rc == 3
    assert "built without them" in result.stderr and "cuda_compat_dir" in result.stderr
    assert launcher.plan("h200_580").decision("compat")[0]["decision"] == "off"  # not needed there


def test_compat_dir_missing_on_disk_is_a_clear_error(launcher):
    launcher.compat_dir.rmdir()
    result = launcher.run("rtx6000ada_550")
    assert result.rc == 3 and "does not exist" in result.stderr


@pytest.mark.parametrize("profile,needle", [
    ("no_gpu", "No devices were found"),
    ("no_driver", "couldn't communicate with the NVIDIA driver"),
])
def test_no_gpu_is_a_clear_error(launcher, profile, needle):
    result = launcher.run(profile)
    assert result.rc == 3
    assert needle in result.stderr and "--gpus all" in result.stderr


def test_nvidia_smi_missing_is_a_clear_error(launcher, tmp_path):
    result = launcher.run("h200_580", env={"VL_NVIDIA_SMI": str(tmp_path / "nowhere" / "nvidia-smi")})
    assert result.rc == 3
    assert "nvidia-smi not found" in result.stderr and "VL_NVIDIA_SMI" in result.stderr


def test_tensor_parallel_follows_gpu_count_and_knobs(launcher):
    assert launcher.plan("a40x2_570", env={"VL_TP": "1"}).option("--tensor-parallel-size") == ["1"]
    dp = launcher.plan("a40x2_570", env={"VL_DP": "2"})
    assert dp.option("--tensor-parallel-size") == ["1"] and dp.option("--data-parallel-size") == ["2"]
    forced = launcher.plan("a40x2_570", env={"VL_DP": "2", "VL_TP": "2"})
    assert forced.option("--tensor-parallel-size") == ["1"]
    assert any("overridden" in d["decision"] for d in forced.decision("parallelism"))
    too_many = launcher.run("a40x2_570", env={"VL_DP": "3"})
    assert too_many.rc == 2 and "VL_DP" in too_many.stderr and "accepted values" in too_many.stderr


def test_data_parallel_sizes_context_per_replica(launcher):
    # DP=2: each A40 carries the full weights, so the tier is that of one A40 (script line 808).
    assert launcher.plan("a40x2_570", env={"VL_DP": "2"}).option("--max-model-len") == ["524288"]


def test_probe_refuses_unparsable_memory(tmp_path):
    from entrypoint.launcher.report import LaunchError
    from entrypoint.launcher.probe import parse_query
    with pytest.raises(LaunchError, match="not index,name,MiB"):
        parse_query("0, NVIDIA GH200 480GB, [N/A], 580.95.05, 9.0\n", "nvidia-smi")
    host = parse_query("0, NVIDIA A40, 46068, 570.195.03, 8.6\n1, NVIDIA A40, 46068, 570.195.03, 8.6\n", "x")
    assert host.driver_major == 570 and len(host.gpus) == 2 and host.gpus[1].sm == (8, 6)
