"""The status page of a pod that swaps prints Claude Code's block for the set: opus on the model that starts
first, sonnet on the other (so `/model sonnet` swaps), and the smallest context of the set."""

from __future__ import annotations

from entrypoint.claudecode import paste_block
from prebake_testing.net import get


def test_the_block_names_the_models_of_the_set(pods, tmp_path):
    pod = pods({"ornith": {}, "qwen": {}}, env={"VL_CACHE_ROOT": str(tmp_path / "volume"),
                                                "VLLM_API_KEY": "swap-pod-key-123"})
    key = {"authorization": "Bearer swap-pod-key-123"}
    models = {model["id"]: model for model in get(pod.port, "/v1/models", key)[2]["data"]}
    page = get(pod.port, "/prebake/status", key)[2]["claude_code"]
    smallest = min(models[name]["max_model_len"] for name in ("ornith", "qwen"))
    assert page["model"] == "ornith" and page["swaps_to"] == ["qwen"] and page["context"] == smallest
    assert page["paste"] == paste_block('"$POD"', "ornith", smallest, ("qwen",))
    assert "ANTHROPIC_DEFAULT_SONNET_MODEL=qwen" in page["paste"]
