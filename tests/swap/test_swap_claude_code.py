"""The status page of a pod that swaps prints Claude Code's block for the set: opus on the model that starts
first, sonnet on the other (so `/model sonnet` swaps), and the smallest context of the set."""

from __future__ import annotations

from entrypoint.claudecode import paste_block
from prebake_testing.net import get, wait_until
from prebake_testing.swappod import SLEEP, warm

SLEEP_KEY = "sleep-pod-key-123"


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


def test_after_a_sleep_mode_warm_up_the_block_still_names_the_set_as_the_docs_do(pods):
    """With sleep mode every model starts once, so the vLLM started last is qwen's while ornith is the one awake:
    the page, its JSON and the block still pin opus and haiku on ornith, sonnet on qwen (docs/swap.md)."""
    pod = pods({"ornith": {}, "qwen": {}}, env={**SLEEP, "VLLM_API_KEY": SLEEP_KEY})
    swap = warm(pod)
    assert swap["models"]["ornith"] == "awake"

    # the monitor rereads the launcher's state file: wait until the page shows the argv of the vLLM started last
    def showing_qwens_argv() -> dict | None:
        status = get(pod.port, "/prebake/status", {"authorization": f"Bearer {SLEEP_KEY}"})[2]
        return status if "qwen" in status["vllm"]["argv"] else None

    status = wait_until(showing_qwens_argv, 10, "qwen's vLLM argv on the status page", pod.process)
    page = status["claude_code"]
    assert page["model"] == "ornith" and page["swaps_to"] == ["qwen"]
    assert page["paste"] == paste_block('"$POD"', "ornith", page["context"], ("qwen",))
    assert "ANTHROPIC_DEFAULT_OPUS_MODEL=ornith ANTHROPIC_DEFAULT_SONNET_MODEL=qwen " \
           "ANTHROPIC_DEFAULT_HAIKU_MODEL=ornith" in page["paste"]
    html = get(pod.port, "/", {"accept": "text/html"})[2].decode()
    assert "<title>prebake pod: ornith (" in html and "ANTHROPIC_DEFAULT_SONNET_MODEL=qwen" in html
