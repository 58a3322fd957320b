"""HF_HUB_OFFLINE only when every repository vLLM will load is complete in a real cache layout."""

from prebake_testing.hfcache import ORNITH, cache_repo, sharded_weights


def test_offline_when_weights_cached(launcher):
    cache_repo(launcher.hf_home / "hub", ORNITH, sharded_weights(3))
    result = launcher.plan("h200_580")
    assert result.env["HF_HUB_OFFLINE"] == "1"
    assert "all 3 weight shards cached" in result.decision("hf-offline")[0]["why"]


def test_online_when_a_shard_is_missing(launcher):
    files = sharded_weights(3)
    del files["model-00002-of-00003.safetensors"]  # an interrupted download
    cache_repo(launcher.hf_home / "hub", ORNITH, files)
    result = launcher.plan("h200_580")
    assert "HF_HUB_OFFLINE" not in result.env
    assert "1 of 3 weight shards missing" in result.decision("hf-offline")[0]["why"]


def test_online_when_not_cached_and_stale_offline_removed(launcher):
    result = launcher.plan("h200_580", env={"HF_HUB_OFFLINE": "1"})
    assert result.env["HF_HUB_OFFLINE"] is None  # a previous setting must not survive (v56/v57)
    assert result.decision("hf-offline")[0]["decision"] == "off"


def test_hf_hub_cache_is_honoured(launcher, tmp_path):
    other = tmp_path / "elsewhere"
    cache_repo(other, ORNITH, sharded_weights(1))
    assert "HF_HUB_OFFLINE" not in launcher.plan("h200_580").env
    assert launcher.plan("h200_580", env={"HF_HUB_CACHE": str(other)}).env["HF_HUB_OFFLINE"] == "1"


def test_single_file_weights(launcher):
    cache_repo(launcher.hf_home / "hub", "Qwen/Qwen3-8B", {"config.json": "{}", "model.safetensors": "w"})
    assert launcher.plan("h200_580", env={"VL_MODEL": "Qwen/Qwen3-8B"}).env["HF_HUB_OFFLINE"] == "1"


def test_tokenizer_and_draft_repos_must_be_cached_too(launcher):
    hub = launcher.hf_home / "hub"
    cache_repo(hub, "cyankiwi/Kimi-Linear-48B-A3B-Instruct-AWQ-4bit", sharded_weights(2))
    assert "HF_HUB_OFFLINE" not in launcher.plan("h200_580", env={"VL_MODEL": "kimi"}).env
    cache_repo(hub, "patdev/kimi-linear-tokenizer-fix", {"tokenizer_config.json": "{}"})
    assert launcher.plan("h200_580", env={"VL_MODEL": "kimi"}).env["HF_HUB_OFFLINE"] == "1"
    cache_repo(hub, ORNITH, sharded_weights(1))
    assert "HF_HUB_OFFLINE" not in launcher.plan("h200_580", env={"VL_SPEC": "dspark"}).env  # draft missing


def test_offline_knob(launcher):
    assert launcher.plan("h200_580", env={"VL_HFOFFLINE": "on"}).env["HF_HUB_OFFLINE"] == "1"
    cache_repo(launcher.hf_home / "hub", ORNITH, sharded_weights(1))
    assert "HF_HUB_OFFLINE" not in launcher.plan("h200_580", env={"VL_HFOFFLINE": "off"}).env
