"""Every catalogue model through the real command line; the expectations are read from models.toml."""

import json
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from prebake_testing.hosts import ROOT

CATALOGUE = tomllib.loads((ROOT / "entrypoint" / "models.toml").read_text())["models"]
SCRIPT_MODELS = ["ornith", "ornithfp8", "ornithnvfp4", "nemotron", "qwen", "kimi", "reap", "dense", "qwen38nvfp4"]


def test_catalogue_holds_every_model_of_the_script():
    assert sorted(CATALOGUE) == sorted(SCRIPT_MODELS)
    for key, entry in CATALOGUE.items():
        for field in ("architecture", "repo", "served_name", "native_context", "weights_gib", "kv_bytes_per_token",
                      "kv_cache_dtype", "speculation", "speculation_allowed", "mtp_tokens", "trust_remote_code"):
            assert field in entry, f"{key} lacks {field}"


def test_every_entry_names_a_model_class_of_the_images_vllm():
    """Each architecture is a class vLLM 0.27.1's registry knows (the seed's comments name the family:
    Qwen3.5 Gated DeltaNet hybrids, NemotronH, Kimi-Linear, Qwen3-MoE)."""
    known = {"Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "NemotronHForCausalLM",
             "KimiLinearForCausalLM", "Qwen3MoeForCausalLM"}
    assert {entry["architecture"] for entry in CATALOGUE.values()} == known


def test_an_entry_without_its_architecture_is_refused_by_name(tmp_path):
    from entrypoint.launcher.catalogue import load_catalogue
    from entrypoint.launcher.report import LaunchError
    text = (ROOT / "entrypoint" / "models.toml").read_text().replace(
        'architecture = "KimiLinearForCausalLM"\n', "", 1)
    path = tmp_path / "models.toml"
    path.write_text(text)
    with pytest.raises(LaunchError, match=r"\[models\.kimi\] lacks architecture"):
        load_catalogue(str(path))


@pytest.mark.parametrize("key", SCRIPT_MODELS)
def test_model_argv_follows_the_catalogue(launcher, key):
    entry = CATALOGUE[key]
    host = "rtxpro6000_580" if entry.get("gpu_family") == "blackwell" else "h200_580"
    result = launcher.plan(host, env={"VL_MODEL": key})
    argv = result.argv
    assert argv[:3] == ["vllm", "serve", entry["repo"]]
    name = entry["served_name"]
    assert result.option("--served-model-name")[:3] == [name, f"claude-{name}", f"claude-{name}[1m]"]
    assert "claude-sonnet-5[1m]" in result.option("--served-model-name")
    assert result.option("--tool-call-parser") == ([entry["tool_call_parser"]] if "tool_call_parser" in entry else None)
    assert result.option("--reasoning-parser") == ([entry["reasoning_parser"]] if "reasoning_parser" in entry else None)
    assert ("--trust-remote-code" in argv) == entry["trust_remote_code"]
    assert result.option("--tokenizer") == ([entry["tokenizer"]] if "tokenizer" in entry else None)
    kv = entry["kv_cache_dtype"]
    assert result.option("--kv-cache-dtype") == (None if kv == "auto" else [kv])
    assert result.option("--gpu-memory-utilization") == ["0.93"]
    # speculation default, and async scheduling only without it
    spec = result.option("--speculative-config")
    if entry["speculation"] == "off":
        assert spec is None and "--async-scheduling" in argv
    else:
        config = json.loads(spec[0])
        assert config["method"] == entry["speculation"]
        if config["method"] == "mtp":
            assert config["num_speculative_tokens"] == entry["mtp_tokens"]
        assert "--async-scheduling" not in argv
    for flag in entry.get("flags", []):
        if "knob" not in flag:
            assert result.option(flag["flag"]) == [flag["value"]]
    # COMMON flags of the script (lines 1030-1049)
    for flag in ("--disable-custom-all-reduce", "--enable-prompt-tokens-details", "--enable-prefix-caching",
                 "--enable-auto-tool-choice"):
        assert argv.count(flag) == 1, flag
    # vLLM behind the keep-alive bridge, which holds 8080 (VL_BRIDGE=keepalive by default)
    assert result.option("--host") == ["127.0.0.1"] and result.option("--port") == ["18081"]
    assert result.option("--max-num-batched-tokens") == ["8192"] and result.option("--max-num-seqs") == ["64"]
    assert result.option("--limit-mm-per-prompt") == ['{"video":0}']
    assert result.env["VLLM_USE_FASTOKENS"] == "1" and result.env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"


def test_speculation_per_model_as_measured(launcher):
    # MTP for the Qwen3.8 models, off for Ornith int4, never for Kimi-Linear.
    assert json.loads(launcher.plan("h200_580", env={"VL_MODEL": "dense"}).option("--speculative-config")[0]) == \
        {"method": "mtp", "num_speculative_tokens": 3}
    assert launcher.plan("h200_580", env={"VL_MODEL": "ornith"}).option("--speculative-config") is None
    kimi = launcher.run("h200_580", env={"VL_MODEL": "kimi", "VL_SPEC": "mtp"})
    assert kimi.rc == 2 and "VL_SPEC" in kimi.stderr and "accepted values for this model are off" in kimi.stderr
    assert launcher.run("h200_580", env={"VL_MODEL": "kimi", "VL_SPEC": "on"}).rc == 2


def test_spec_overrides(launcher):
    mtp = launcher.plan("h200_580", env={"VL_MODEL": "ornithfp8", "VL_SPEC": "mtp", "VL_MTP_N": "4"})
    assert json.loads(mtp.option("--speculative-config")[0]) == {"method": "mtp", "num_speculative_tokens": 4}
    ngram = json.loads(launcher.plan("h200_580", env={"VL_SPEC": "on"}).option("--speculative-config")[0])
    assert ngram["method"] == "ngram" and ngram["num_speculative_tokens"] == 24
    assert ngram["num_speculative_tokens_per_batch_size"][0] == [1, 1, 24]
    off = launcher.plan("h200_580", env={"VL_MODEL": "dense", "VL_SPEC": "off"})
    assert off.option("--speculative-config") is None and "--async-scheduling" in off.argv
    no_async = launcher.plan("h200_580", env={"VL_ASYNC": "off"})
    assert "--async-scheduling" not in no_async.argv
    dspark = launcher.plan("h200_580", env={"VL_SPEC": "dspark"})
    assert json.loads(dspark.option("--speculative-config")[0])["model"] == "RedHatAI/Qwen3.6-35B-A3B-speculator.dspark"
    assert dspark.option("--gpu-memory-utilization") == ["0.9"]  # 0.93 nearly OOMed at graph capture
    refused = launcher.run("a40x2_570", env={"VL_SPEC": "dspark", "VL_KV": "turboquant_k3v4_nc"})
    assert refused.rc == 2 and "No valid attention backend" in refused.stderr


def test_kv_dtype_and_utilisation(launcher):
    tq = launcher.plan("a40x2_570", env={"VL_KV": "turboquant_k3v4_nc", "VL_ATTN": "FLASHINFER"})
    assert tq.option("--kv-cache-dtype") == ["turboquant_k3v4_nc"]
    assert tq.option("--gpu-memory-utilization") == ["0.85"]
    assert tq.option("--attention-backend") is None  # FLASHINFER is incompatible with TurboQuant
    own = launcher.plan("a40x2_570", env={"VL_KV": "turboquant_k3v4_nc", "VL_UTIL": "0.8"})
    assert own.option("--gpu-memory-utilization") == ["0.8"]
    bf16 = launcher.plan("h200_580", env={"VL_MODEL": "qwen", "VL_KV": "bf16"})
    assert bf16.option("--kv-cache-dtype") is None
    attn = launcher.plan("h200_580", env={"VL_ATTN": "FLASHINFER"})
    assert attn.option("--attention-backend") == ["FLASHINFER"]


def test_nemotron_knobs_and_their_constraints(launcher):
    result = launcher.plan("rtxpro6000_580", env={"VL_MODEL": "nemotron", "VL_MAMBA_BACKEND": "triton",
                                                   "VL_REPLAYSSM": "on", "VL_STOCHASTIC": "on", "VL_SSU": "simple"})
    assert result.option("--mamba-backend") == ["triton"]
    assert "--use-replayssm" in result.argv
    assert "--enable-mamba-cache-stochastic-rounding" in result.argv
    assert result.option("--mamba-cache-philox-rounds") == ["5"]
    assert result.option("--mamba-ssu-algorithm") == ["simple"]
    default = launcher.plan("rtxpro6000_580", env={"VL_MODEL": "nemotron"})
    assert default.option("--mamba-backend") == ["flashinfer"] and default.option("--mamba-ssm-cache-dtype") == ["float16"]
    assert default.option("--mamba-cache-mode") == ["align"] and "--use-replayssm" not in default.argv
    # Triton + stochastic rounding is fatal before Blackwell (ptxas .rs on sm_89).
    ada = launcher.run("rtx6000ada_550", env={"VL_MODEL": "nemotron", "VL_MAMBA_BACKEND": "triton", "VL_STOCHASTIC": "on"})
    assert ada.rc == 2 and "VL_STOCHASTIC" in ada.stderr
    replay = launcher.run("rtxpro6000_580", env={"VL_MODEL": "nemotron", "VL_REPLAYSSM": "on"})
    assert replay.rc == 2 and "VL_MAMBA_BACKEND=triton" in replay.stderr


def test_generic_hugging_face_repo_gets_safe_defaults(launcher):
    result = launcher.plan("h200_580", env={"VL_MODEL": "Qwen/Qwen3-8B"})
    assert result.argv[:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert result.option("--served-model-name")[:3] == ["qwen3-8b", "claude-qwen3-8b", "claude-qwen3-8b[1m]"]
    for flag in ("--tool-call-parser", "--reasoning-parser", "--max-model-len", "--hf-overrides",
                 "--speculative-config", "--kv-cache-dtype", "--tokenizer"):
        assert result.option(flag) is None, flag
    assert "--trust-remote-code" not in result.argv and "--enable-auto-tool-choice" not in result.argv
    with_parser = launcher.plan("h200_580", env={"VL_MODEL": "Qwen/Qwen3-8B", "VL_CTX": "32768"},
                                args=["--tool-call-parser", "hermes"])
    assert with_parser.option("--max-model-len") == ["32768"]
    assert "--enable-auto-tool-choice" in with_parser.argv and with_parser.option("--tool-call-parser") == ["hermes"]


def test_catalogue_repo_id_gets_the_catalogue_entry(launcher):
    result = launcher.plan("h200_580", env={"VL_MODEL": CATALOGUE["kimi"]["repo"]})
    assert result.option("--tokenizer") == [CATALOGUE["kimi"]["tokenizer"]]
