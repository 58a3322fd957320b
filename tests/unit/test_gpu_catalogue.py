"""The GPU harness's `catalogue` run (issue 49), what of it runs without a GPU: the scaled configs of
benchmarks/gpu/catalogue.toml against the catalogue, the model folders written for vLLM, the run's argument
handling through harness.py's real command line, and its reading of the reasoning parser's shape."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from benchmarks.gpu.catalogue_configs import KIMI_TOKENS, CatalogueConfigError, config_for, load, write_model
from benchmarks.gpu.catalogue_run import keys_to_run, parser_shape
from prebake_testing import REPO

GPU = REPO / "benchmarks" / "gpu"

MODELS = tomllib.loads((REPO / "entrypoint" / "models.toml").read_text())["models"]
TABLE = load()


def text_config(key: str) -> dict:
    config = config_for(key)
    return config.get("text_config") or config


def test_every_catalogue_entry_has_a_scaled_config_of_its_own_architecture():
    assert list(TABLE["entries"]) == list(MODELS)
    for key, model in MODELS.items():
        assert config_for(key)["architectures"] == [model["architecture"]], key


@pytest.mark.parametrize("key", list(MODELS))
def test_a_scaled_config_keeps_the_layer_mix_and_is_smaller(key):
    config, text = config_for(key), text_config(key)
    family = TABLE["entries"][key]["family"]
    assert text["hidden_size"] <= 1024 and text["vocab_size"] == 151936  # the carried Qwen3 tokenizer's
    if family.startswith("qwen3_5"):  # Gated DeltaNet hybrid: linear and full attention, MTP head, vision tower
        assert {"linear_attention", "full_attention"} == set(text["layer_types"])
        assert text["mtp_num_hidden_layers"] == 1 and "vision_config" in config
    if family == "nemotron_h":  # Mamba2, MoE and attention layers
        assert set(config["hybrid_override_pattern"]) == {"M", "E", "*"}
    if family == "kimi_linear":  # KDA and MLA layers, one dense layer first
        linear = config["linear_attn_config"]
        assert linear["kda_layers"] and linear["full_attn_layers"] and config["kv_lora_rank"]
        assert sorted(linear["kda_layers"] + linear["full_attn_layers"]) == list(range(1, config["num_hidden_layers"] + 1))
    if "num_experts" in text or "n_routed_experts" in text:
        assert (text.get("num_experts") or text.get("n_routed_experts")) <= 16


def test_quantization_is_configured_where_the_entry_says_and_can_be_left_out():
    for key, entry in TABLE["entries"].items():
        quantized = "quantization_config" in config_for(key)
        assert quantized == entry["quantization"].startswith(("exercised", "CPU only")), key
        assert "quantization_config" not in config_for(key, quantized=False)
    assert config_for("reap")["num_experts"] == 13 and config_for("qwen")["num_experts"] == 16


def test_a_model_folder_has_the_tokenizer_and_the_vision_processors(tmp_path):
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text(json.dumps({
        "added_tokens": [{"id": 5, "content": "<|im_end|>", "special": True}], "model": {"vocab": {"a": 0, "b": 4}}}))
    (tokenizer / "tokenizer_config.json").write_text("{}")
    kimi = write_model("kimi", tmp_path / "kimi", tokenizer)
    added = json.loads((kimi / "tokenizer.json").read_text())["added_tokens"]
    assert [t["content"] for t in added[1:]] == KIMI_TOKENS and [t["id"] for t in added[1:]] == [6, 7, 8, 9, 10]
    assert not (kimi / "preprocessor_config.json").exists()
    ornith = write_model("ornith", tmp_path / "ornith", tokenizer)
    assert {"config.json", "chat_template.jinja", "generation_config.json", "preprocessor_config.json",
            "video_preprocessor_config.json"} <= {p.name for p in ornith.iterdir()}
    assert json.loads((ornith / "tokenizer.json").read_text())["added_tokens"] == added[:1]


def test_a_bad_table_is_refused_by_name(tmp_path):
    text = (GPU / "catalogue.toml").read_text().replace('family = "kimi_linear"', 'family = "kimi_linear2"')
    (tmp_path / "catalogue.toml").write_text(text)
    with pytest.raises(CatalogueConfigError, match=r"\[entries\.kimi\] family 'kimi_linear2'"):
        load(tmp_path / "catalogue.toml")
    with pytest.raises(CatalogueConfigError, match="no \\[entries.nope\\]"):
        config_for("nope")


def test_keys_to_run_starts_what_fits_hopper_and_checks_the_rest_refused():
    started, refused = keys_to_run([])
    assert refused == ["qwen38nvfp4"] and started == [k for k in MODELS if k != "qwen38nvfp4"]
    assert keys_to_run(["kimi", "qwen38nvfp4"]) == (["kimi"], ["qwen38nvfp4"])
    with pytest.raises(ValueError, match=r"unknown catalogue keys \['kimmi'\]"):
        keys_to_run(["kimmi"])


def test_harness_refuses_an_unknown_catalogue_key_before_touching_the_device():
    done = subprocess.run([sys.executable, str(GPU / "harness.py"), "catalogue", "ornith", "kimmi"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown catalogue keys ['kimmi']" in done.stderr, done.stderr
    assert "plugin installed" not in done.stdout


@pytest.mark.parametrize("blocks, thinking, reasoning, ok", [
    ([{"type": "thinking", "text": "hm"}, {"type": "text", "text": "hi"}], "on", True, True),
    ([{"type": "thinking", "text": "hm"}, {"type": "tool_use", "text": "Bash"}], "on", True, True),
    ([{"type": "text", "text": "hi"}, {"type": "thinking", "text": "hm"}], "on", True, False),  # thinking after text
    ([{"type": "text", "text": "a </think> b"}], "on", True, False),  # the parser let its tag through
    ([{"type": "thinking", "text": "hm"}], "off", True, False),  # thinking off, yet a thinking block
    ([{"type": "text", "text": "hi"}], "off", True, True),
    ([{"type": "thinking", "text": "hm"}], "on", False, False),  # no reasoning parser: never a thinking block
])
def test_the_reasoning_parser_shape(blocks, thinking, reasoning, ok):
    assert parser_shape(blocks, thinking, reasoning)[0] is ok


def test_message_blocks_reads_vllms_anthropic_answers(monkeypatch):
    """The run's /v1/messages reader against the stand-in vLLM's exact SSE and JSON shapes (text blocks)."""
    from benchmarks.gpu import harness
    from benchmarks.gpu.catalogue_run import message_blocks
    from prebake_testing.servers import StandIn

    server = StandIn(args=["--served-model-name", "ornith"])
    try:
        monkeypatch.setattr(harness, "BRIDGE", server.url)
        for stream in (True, False):
            status, blocks, error = message_blocks(harness, "ornith", stream, "off")
            assert (status, error) == (200, ""), (stream, error)
            assert [b["type"] for b in blocks] == ["text"] and blocks[0]["text"], (stream, blocks)
            assert parser_shape(blocks, "off", True)[0]
    finally:
        server.stop()
