"""mm-dummy-inputs without an image: the host profile it plans on, its verdict on the program's report, and the model
folders the spec carries (tests/integration/prebuilt/test_mm_dummy_inputs.py runs it in the a40 image)."""

import json

import pytest

from benchmarks.gpu.catalogue_configs import HERE, byte_symbols, small_tokenizer
from prebake import selftest
from prebake.errors import PrebakeError
from prebake.incontainer.checks.mm_dummy_inputs import host_of, verdict

HOSTS = selftest.vllm_args_spec()["hosts"]


@pytest.mark.parametrize("arch, host, gpu", [
    ("8.6", "a40x1_580", "NVIDIA A40"),  # one A40 rather than the pair
    ("8.9", "rtx6000ada_550", "NVIDIA RTX 6000 Ada Generation"),
    ("9.0", "h200_580", "NVIDIA H200"),
    ("12.0", "rtxpro6000_580", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
])
def test_it_plans_on_a_host_of_the_variants_gpu_with_the_fewest_gpus(arch, host, gpu):
    name, found = host_of({"cuda_arch": arch, "vllm_args": {"hosts": HOSTS}})
    assert (name, found["name"]) == (host, gpu)
    assert found["capability"] == [int(part) for part in arch.split(".")]


def test_a_variant_whose_gpu_no_profile_has_is_named():
    with pytest.raises(ValueError, match=r"compute capability 7\.5\) among a40x2_570, .*VLLM_ARGS_HOSTS"):
        host_of({"cuda_arch": "7.5", "vllm_args": {"hosts": HOSTS}})


REPORT = {"transformers": "5.24.0", "text_only": ["kimi"], "results": [
    {"key": "ornith", "ok": False, "seconds": 2.0,
     "detail": "ValueError: Failed to apply Qwen3VLProcessor <- ValueError: Found 1 <|image_pad|> tokens"},
    {"key": "dense", "ok": True, "seconds": 3.0, "detail": "a dummy image"},
    {"key": "qwen38nvfp4", "ok": True, "detail": "not started on this GPU", "skipped": "the launcher refuses it"}]}


def test_the_verdict_names_each_failing_model_and_transformers():
    ok, detail = verdict(REPORT, "a40x1_580")
    assert not ok
    assert detail.startswith("1 of 2 multimodal models fail vLLM's dummy-input profile on a40x1_580 with "
                             "transformers 5.24.0 (a pod's start would die there): ornith: ValueError: Failed")
    assert detail.endswith("not checked: qwen38nvfp4 (the launcher refuses it); text-only: kimi")


def test_the_verdict_passes_with_each_models_time_and_says_when_it_was_recorded():
    passing = dict(REPORT, results=REPORT["results"][1:], transformers="5.14.1")
    ok, detail = verdict(passing, "h200_580", " (recorded)")
    assert ok and detail.startswith("1 multimodal models (dense 3.0 s) on h200_580, transformers 5.14.1: a dummy image")
    assert detail.endswith("text-only: kimi (recorded)")
    # a catalogue without a multimodal model (or whose every one the GPU cannot run) has nothing to fail
    assert verdict(dict(REPORT, results=REPORT["results"][2:]), "a40x1_580")[0]


def test_the_spec_carries_every_vision_entrys_folder_with_the_small_tokenizer():
    folders = selftest.mm_models_spec()
    assert sorted(folders) == ["dense", "ornith", "ornithfp8", "ornithnvfp4", "qwen38nvfp4"]
    for files in folders.values():
        assert sorted(files) == ["chat_template.jinja", "config.json", "generation_config.json",
                                 "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json",
                                 "video_preprocessor_config.json"]
        assert "vision_config" in json.loads(files["config.json"])
        assert len(files["tokenizer.json"]) < 20000  # not the 11 MB Qwen3 tokenizer


def test_a_missing_folder_writer_stops_the_build_with_its_path(monkeypatch, tmp_path):
    monkeypatch.setattr(selftest, "CATALOGUE_CONFIGS", tmp_path / "catalogue_configs.py")
    with pytest.raises(PrebakeError, match=r"catalogue_configs\.py --files \(run build\.py from a full checkout\)"):
        selftest.mm_models_spec()


def test_the_small_tokenizer_has_the_vision_placeholders_at_the_ids_the_configs_name():
    tokenizer = small_tokenizer(HERE / "tokenizer_config.json")
    ids = {token["content"]: token["id"] for token in tokenizer["added_tokens"]}
    config = json.loads(selftest.mm_models_spec()["ornith"]["config.json"])
    assert ids["<|image_pad|>"] == config["image_token_id"] == 151655
    assert ids["<|video_pad|>"] == config["video_token_id"]
    assert ids["<|vision_start|>"] == config["vision_start_token_id"]
    assert ids["<|vision_end|>"] == config["vision_end_token_id"]
    # GPT-2's byte-level alphabet, every byte once, as the first 256 ids of Qwen3's vocabulary
    assert tokenizer["model"]["vocab"] == {symbol: n for n, symbol in enumerate(byte_symbols())}
    assert len(set(byte_symbols())) == 256 and byte_symbols()[:3] == ["!", '"', "#"]
    assert tokenizer["model"]["merges"] == []
