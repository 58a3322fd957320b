"""The catalogue on the hopper image's H200 (issue 49), through the launcher's real command line: what the GPU
harness's `catalogue` run starts, and the one entry it must find refused."""

from __future__ import annotations

import json
import tomllib

import pytest

from prebake_testing.hosts import ROOT, assert_clear_error, write_marker

CATALOGUE = tomllib.loads((ROOT / "entrypoint" / "models.toml").read_text())["models"]


@pytest.fixture
def hopper(launcher):
    write_marker(launcher.marker, None, variant="hopper", cuda_arch="9.0")
    return launcher


def test_the_w4a4_entry_is_refused_on_an_h200_naming_what_fits(hopper):
    result = hopper.run("h200_580", env={"VL_MODEL": "qwen38nvfp4"})
    assert_clear_error(result, 2, "VL_MODEL=qwen38nvfp4 needs Blackwell (compute capability 10.0+)",
                       "this host has NVIDIA H200 (9.0)", "W4A4 NVFP4")
    fitting = result.stderr.split("Models that fit this host:")[1]
    assert [k.strip(" .\n") for k in fitting.split(",")] == [k for k in CATALOGUE if k != "qwen38nvfp4"]


@pytest.mark.parametrize("key", [k for k in CATALOGUE if k != "qwen38nvfp4"])
def test_every_other_entry_is_planned_with_yarn_where_vllm_takes_it(hopper, key):
    result = hopper.plan("h200_580", env={"VL_MODEL": key})
    entry = CATALOGUE[key]
    assert result.argv[2] == entry["repo"]
    overrides = result.option("--hf-overrides")
    if "yarn_factor" not in entry:
        assert overrides is None
        return
    # a multimodal Qwen3.5 checkpoint: into its language model's RoPE (vLLM 0.27.1 refuses rope_scaling at the top)
    assert entry["architecture"].endswith("ForConditionalGeneration")
    assert json.loads(overrides[0]) == {"text_config": {"rope_parameters": {
        "rope_type": "yarn", "factor": entry["yarn_factor"], "original_max_position_embeddings": entry["native_context"]}}}
