"""Invalid values stop before anything runs; precedence environment > launch_defaults > default."""

import pytest

from prebake_testing.hosts import write_marker

INVALID = [
    ("VL_CTX", "abc"), ("VL_CTX", "100"), ("VL_TP", "0"), ("VL_TP", "two"), ("VL_DP", "-1"),
    ("VL_MODEL", "nonsense"), ("VL_MODEL", "../etc/passwd"), ("VL_SPEC", "maybe"), ("VL_KV", "int4"),
    ("VL_PORT", "8081"), ("VL_PORT", "3001"), ("VL_PORT", "70000"), ("VL_UTIL", "1.5"), ("VL_UTIL", "0"),
    ("VL_YARN", "perhaps"), ("VL_BATCHED", "lots"), ("VL_ATTN", "FA9"), ("VL_HFOFFLINE", "sometimes"),
    ("VL_NUMA_NODES", "0,1"), ("VL_MAMBA_BACKEND", "cuda"), ("VL_YARN_FACTOR", "1"),
]


@pytest.mark.parametrize("name,value", INVALID)
def test_invalid_value_stops_with_variable_and_accepted_values(launcher, name, value):
    # no_gpu: the value is refused before the host is even probed
    result = launcher.run("no_gpu", env={name: value})
    assert result.rc == 2, result.stderr
    assert name in result.stderr and "accepted values" in result.stderr
    assert result.stdout == ""


def test_unknown_model_lists_the_catalogue(launcher):
    result = launcher.run("h200_580", env={"VL_MODEL": "nonsense"})
    assert "ornith, ornithfp8" in result.stderr and "owner/name" in result.stderr


def test_context_beyond_the_model_limit_is_refused(launcher):
    too_long = launcher.run("h200_580", env={"VL_MODEL": "ornith", "VL_CTX": "2000000"})
    assert too_long.rc == 2 and "1024 to 1048576" in too_long.stderr
    no_yarn = launcher.run("h200_580", env={"VL_MODEL": "ornith", "VL_CTX": "500000", "VL_YARN": "off"})
    assert no_yarn.rc == 2 and "with VL_YARN=on" in no_yarn.stderr


def test_context_knobs(launcher):
    short = launcher.plan("h200_580", env={"VL_CTX": "131072"})
    assert short.option("--max-model-len") == ["131072"]
    assert short.option("--hf-overrides") is None and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in short.env
    native = launcher.plan("h200_580", env={"VL_YARN": "off"})
    assert native.option("--max-model-len") == ["262144"] and native.option("--hf-overrides") is None
    # the long-context switch alone would let RoPE produce NaN beyond 262 k: removed
    stale = launcher.plan("h200_580", env={"VL_YARN": "off", "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert stale.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] is None
    factor = launcher.plan("rtxpro6000_580", env={"VL_MODEL": "qwen38nvfp4", "VL_YARN_FACTOR": "4.0"})
    assert factor.option("--max-model-len") == ["1000000"]


def test_precedence_environment_then_launch_defaults_then_default(launcher):
    write_marker(launcher.marker, str(launcher.compat_dir), {"VL_MODEL": "qwen", "VL_SEQS": "32"})
    from_defaults = launcher.plan("h200_580")
    assert from_defaults.argv[2] == "cyankiwi/Qwen3-Coder-30B-A3B-Instruct-AWQ-4bit"
    assert from_defaults.option("--max-num-seqs") == ["32"]
    from_env = launcher.plan("h200_580", env={"VL_MODEL": "kimi", "VL_SEQS": ""})  # empty = unset
    assert from_env.option("--served-model-name")[0] == "kimi"
    assert from_env.option("--max-num-seqs") == ["32"]
    write_marker(launcher.marker, str(launcher.compat_dir), {})
    assert launcher.plan("h200_580").option("--served-model-name")[0] == "ornith"  # built-in default


def test_invalid_launch_default_names_its_source(launcher):
    write_marker(launcher.marker, str(launcher.compat_dir), {"VL_TP": "zero"})
    result = launcher.run("h200_580")
    assert result.rc == 2 and "VL_TP='zero'" in result.stderr and "launch_defaults" in result.stderr


def test_variant_flashinfer_default_and_override(launcher):
    write_marker(launcher.marker, str(launcher.compat_dir), {"VL_FLASHINFER": "on"})
    assert launcher.plan("h200_580").env["VLLM_USE_FLASHINFER_SAMPLER"] == "1"
    assert launcher.plan("h200_580", env={"VL_FLASHINFER": "off"}).env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"


def test_aliases_port_and_switches(launcher):
    result = launcher.plan("h200_580", env={"VL_ALIASES": "gpt-5 ornith", "VL_PORT": "18081", "VL_BRIDGE": "off", "VL_NOVIDEO": "off",
                                             "VL_BATCHED": "4096", "VL_SEQS": "16", "VL_OPT": "3", "VL_FASTOK": "0"})
    assert result.option("--served-model-name") == ["ornith", "claude-ornith", "claude-ornith[1m]", "gpt-5"]
    assert result.option("--port") == ["18081"]
    assert result.option("--limit-mm-per-prompt") is None
    assert result.option("--max-num-batched-tokens") == ["4096"] and result.option("--max-num-seqs") == ["16"]
    assert result.option("--optimization-level") == ["3"]
    assert result.env["VLLM_USE_FASTOKENS"] == "0"
    none = launcher.plan("h200_580", env={"VL_ALIASES": "none"})
    assert none.option("--served-model-name") == ["ornith", "claude-ornith", "claude-ornith[1m]"]
    ep = launcher.plan("a40x2_570", env={"VL_EP": "on", "VL_NUMA": "on"})
    assert "--enable-expert-parallel" in ep.argv and ep.option("--numa-bind-nodes") == ["0", "1"]
    assert "--enable-expert-parallel" not in launcher.plan("h200_580", env={"VL_EP": "on"}).argv  # TP 1


def test_retired_and_misspelt_knobs_are_reported_not_fatal(launcher):
    result = launcher.plan("h200_580", env={"VL_LMCACHE": "on", "VL_MODLE": "qwen"})
    ignored = {d["decision"]: d["why"] for d in result.decision("ignored")}
    assert "second server process" in ignored["VL_LMCACHE"]
    assert "did you mean VL_MODEL" in ignored["VL_MODLE"]


@pytest.mark.parametrize("content,needle", [
    (None, "marker file missing"),
    ("not json", "not JSON"),
    ('["a list"]', "not a JSON object"),
    ('{"schema": 1}', 'no "variant"'),
])
def test_marker_missing_or_broken_means_not_prebaked(launcher, content, needle):
    if content is None:
        launcher.marker.unlink()
    else:
        launcher.marker.write_text(content)
    result = launcher.run("h200_580")
    assert result.rc == 4
    assert "not prebaked" in result.stderr and needle in result.stderr and str(launcher.marker) in result.stderr


def test_marker_needs_only_variant(launcher):
    launcher.marker.write_text('{"variant": "hopper"}')
    result = launcher.plan("h200_580")
    assert result.decision("compat")[0]["decision"] == "off"
