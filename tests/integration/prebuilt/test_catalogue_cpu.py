"""Every catalogue entry's scaled config with its real flags, validated by vLLM 0.27.1's own config classes in the
built a40 image (issue 49): benchmarks/gpu/catalogue_cpu.py, ONE container for all of them. What the GPU harness's
`catalogue` run will start on the H200 must first be a VllmConfig that vLLM builds."""

from __future__ import annotations

import pytest

from benchmarks.gpu import catalogue_cpu
from benchmarks.gpu.catalogue_configs import load


def test_every_scaled_entry_is_a_config_vllm_builds(a40):
    if not catalogue_cpu.TOKENIZER.is_file():
        pytest.skip(f"no Qwen3 tokenizer.json at {catalogue_cpu.TOKENIZER} (TOKENIZER_JSON; benchmarks/gpu/fetch.sh)")
    keys = list(load()["entries"])
    code, lines, result = catalogue_cpu.run(keys, a40)
    report = "\n".join(lines)
    assert code == 0, report
    assert [r["key"] for r in result["results"]] == [*keys, "qwen38nvfp4@h200"], report
    by_key = {r["key"]: r for r in result["results"]}
    # the launcher refuses the Blackwell-only entry on the H200; vLLM's config classes take it on sm_120
    assert any(line.startswith("[catalogue-cpu] refused qwen38nvfp4: ") and "Blackwell" in line for line in lines)
    assert by_key["qwen38nvfp4"]["gpu"].startswith("NVIDIA RTX PRO 6000 Blackwell")
    for key, found in by_key.items():
        key = key.split("@")[0]
        assert found["architecture"] == load()["families"][load()["entries"][key]["family"]]["config"][
            "architectures"][0], report
    # what the launcher asked for is what vLLM configured
    assert by_key["ornith"]["rope"] == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}
    assert by_key["dense"]["speculative"]["method"] == "mtp" and by_key["dense"]["speculative"]["tokens"] == 3
    assert (by_key["nemotron"]["mamba_cache_mode"], by_key["nemotron"]["mamba_ssm_cache_dtype"]) == ("align", "float16")
    assert by_key["qwen"]["kv_cache_dtype"] == "fp8"
    # the vision tower's processor, which vLLM's start-up profile feeds a dummy image (video is off)
    assert by_key["ornith"]["processor"] == "Qwen3VLMultiModalProcessor, a dummy image processed"
    assert all(not str(scheme).startswith("refused") for r in result["results"] for scheme in r["schemes"].values()), report
