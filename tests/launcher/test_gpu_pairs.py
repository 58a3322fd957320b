"""Two GPUs on one host (issue 50), the launcher's decisions through its real command line on fake hosts: an A40
pair (the seed's pod, the a40 image) and an H200 pair (the nvidia-h200-x2 device, the hopper image). Tensor parallel
over both GPUs by default, VL_DP=2 for one replica per GPU, the context sized for what each choice holds, vLLM's own
all-reduce off. The A40 image's NCCL settings are baked into /etc/nccl.conf (tests/unit/test_render.py,
tests/integration/test_build.py), never passed in the environment, which did not reach the workers."""

from __future__ import annotations

import tomllib

import pytest

from prebake_testing.hosts import ROOT, write_marker

CATALOGUE = tomllib.loads((ROOT / "entrypoint" / "models.toml").read_text())["models"]
HOPPER = {"variant": "hopper", "cuda_arch": "9.0"}
# (pair profile, one-GPU profile of the same card, marker of its image)
PAIRS = [("a40x2_570", "a40x1_580", {}), ("h200x2_580", "h200_580", HOPPER)]
FITS = [key for key, entry in CATALOGUE.items() if entry.get("gpu_family") != "blackwell"]


def plan(launcher, profile: str, marker: dict, **env):
    if marker:
        write_marker(launcher.marker, None, **marker)
    return launcher.plan(profile, env=env)


def context(result) -> int:
    return int(result.option("--max-model-len")[0])


@pytest.mark.parametrize("pair, one, marker", PAIRS)
def test_a_pair_runs_tensor_parallel_over_both_gpus_by_default(launcher, pair, one, marker):
    result = plan(launcher, pair, marker)
    assert (result.option("--tensor-parallel-size"), result.option("--data-parallel-size")) == (["2"], ["1"])
    assert result.decision("parallelism")[0]["why"] == "VL_TP unset: one shard per GPU (2 GPU(s))"
    assert result.argv.count("--disable-custom-all-reduce") == 1
    assert not [name for name in result.env if name.startswith("NCCL_")]  # /etc/nccl.conf's, not the environment's


@pytest.mark.parametrize("pair, one, marker", PAIRS)
def test_data_parallel_is_one_replica_per_gpu_with_one_gpus_context(launcher, pair, one, marker):
    for key in FITS:
        dp = plan(launcher, pair, marker, VL_MODEL=key, VL_DP="2")
        assert (dp.option("--tensor-parallel-size"), dp.option("--data-parallel-size")) == (["1"], ["2"]), key
        assert dp.argv.count("--disable-custom-all-reduce") == 1
        single = plan(launcher, one, marker, VL_MODEL=key)
        assert context(dp) == context(single), key  # each replica holds the full weights on one GPU
    forced = plan(launcher, pair, marker, VL_DP="2", VL_TP="2")
    assert forced.option("--tensor-parallel-size") == ["1"]
    assert any(d["decision"] == "VL_TP=2 overridden to 1" for d in forced.decision("parallelism"))


@pytest.mark.parametrize("pair, one, marker", PAIRS)
def test_tensor_parallel_context_is_sized_for_the_pair(launcher, pair, one, marker):
    grew = []
    for key in FITS:
        tp2 = plan(launcher, pair, marker, VL_MODEL=key)
        tp1 = plan(launcher, pair, marker, VL_MODEL=key, VL_TP="1")
        assert tp1.option("--tensor-parallel-size") == ["1"]
        assert context(tp2) >= context(tp1), key  # half the weights per GPU: never less room
        grew += [key] if context(tp2) > context(tp1) else []
    # An A40 pair lifts Ornith and Kimi from one A40's tier to 1M; an H200 holds every ceiling alone already.
    assert (grew != []) == (pair == "a40x2_570"), grew


def test_the_h200_pair_decisions(launcher):
    """What the nvidia-h200-x2 runs will start (benchmarks/gpu/pair_runs.py): the 8B-like model is outside the
    catalogue, sized from VRAM by vLLM; Ornith at its 1M tier at TP 2 and DP 2."""
    tp2 = plan(launcher, "h200x2_580", HOPPER, VL_MODEL="ornith")
    assert context(tp2) == 1_000_000 and tp2.option("--hf-overrides") is not None
    dp2 = plan(launcher, "h200x2_580", HOPPER, VL_MODEL="ornith", VL_DP="2")
    assert context(dp2) == 1_000_000
    generic = plan(launcher, "h200x2_580", HOPPER, VL_MODEL="tiny/m8b")
    assert generic.option("--tensor-parallel-size") == ["2"] and generic.option("--max-model-len") is None
    too_many = launcher.run("h200x2_580", env={"VL_TP": "4"})
    assert too_many.rc == 2 and "this host has 2" in too_many.stderr


def test_both_models_of_a_swap_pod_run_at_tensor_parallel_2_on_the_h200_pair(launcher):
    """What harness.py swap-tp2 starts: VL_SWAP's sleeping model on both GPUs too, beside the first."""
    result = plan(launcher, "h200x2_580", HOPPER, VL_MODEL="tiny/m8b", VL_SWAP="m4b:tiny/m4b", VL_SWAP_SLEEP="1")
    models = result.plan["swap"]["models"]
    assert [m["name"] for m in models] == ["m8b", "m4b"]
    for model in models:
        argv = model["argv"]
        assert argv[argv.index("--tensor-parallel-size") + 1] == "2" and "--enable-sleep-mode" in argv
