"""Knobs the script read that the launcher now honours as the script did (issue 9)."""


def test_yarn_factor_ignored_for_a_model_without_yarn(launcher):
    result = launcher.plan("h200_580", env={"VL_MODEL": "qwen", "VL_YARN_FACTOR": "4"})
    assert result.option("--hf-overrides") is None and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in result.env
    assert result.option("--max-model-len") == ["262144"]  # not 1,000,000
    ignored = [d for d in result.decision("yarn") if "ignored" in d["decision"]]
    assert ignored and "VL_YARN_FACTOR=4" in ignored[0]["decision"] and "no YaRN" in ignored[0]["why"]


def test_yarn_factor_on_a_yarn_model_is_applied_and_said(launcher):
    result = launcher.plan("h200_580", env={"VL_MODEL": "ornith", "VL_YARN_FACTOR": "2"})
    assert result.option("--max-model-len") == ["524288"]
    assert '"factor":2.0' in result.option("--hf-overrides")[0]
    said = result.decision("yarn-factor")
    assert said and "instead of the catalogue's 4" in said[0]["decision"] and "524288" in said[0]["why"]
    plain = launcher.plan("h200_580", env={"VL_MODEL": "ornith"})
    assert plain.option("--max-model-len") == ["1000000"] and not plain.decision("yarn-factor")


def test_proxy_port_names_the_exposed_port_when_vl_port_is_unset(launcher):
    # The exposed port is the keep-alive bridge's (vLLM's --port is then the internal one).
    result = launcher.plan("h200_580", env={"VL_PROXY_PORT": "8088"})
    assert result.plan["bridge"]["port"] == 8088
    assert "VL_PROXY_PORT" in result.decision("port")[0]["why"]
    assert not [d for d in result.plan["decisions"] if d["topic"] == "ignored" and d["decision"] == "VL_PROXY_PORT"]
    both = launcher.plan("h200_580", env={"VL_PROXY_PORT": "8088", "VL_PORT": "9000"})
    assert both.plan["bridge"]["port"] == 9000
    assert launcher.plan("h200_580").plan["bridge"]["port"] == 8080
    off = launcher.plan("h200_580", env={"VL_PROXY_PORT": "8088", "VL_BRIDGE": "off"})
    assert off.option("--port") == ["8088"]


def test_proxy_port_on_a_runpod_nginx_port_is_refused(launcher):
    result = launcher.run("h200_580", env={"VL_PROXY_PORT": "8081"})
    assert result.rc == 2 and "VL_PROXY_PORT='8081'" in result.stderr and "9091" in result.stderr


def test_progress_bars_off_unless_the_user_set_them(launcher):
    assert launcher.plan("h200_580").env["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    kept = launcher.plan("h200_580", env={"HF_HUB_DISABLE_PROGRESS_BARS": "0"})
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in kept.env


def test_model_needing_blackwell_is_refused_on_an_a40_naming_what_fits(launcher):
    result = launcher.run("a40x2_570", env={"VL_MODEL": "qwen38nvfp4"})
    assert result.rc == 2 and result.stdout == ""
    assert "Blackwell" in result.stderr and "NVIDIA A40 (8.6)" in result.stderr
    fitting = result.stderr.split("Models that fit this host:")[1]
    assert "dense" in fitting and "ornith" in fitting and "qwen38nvfp4" not in fitting
    assert "Traceback" not in result.stderr
    assert launcher.plan("rtxpro5000_580", env={"VL_MODEL": "qwen38nvfp4"}).argv[2] == "unsloth/Qwen3.8-27B-NVFP4"


def test_yarn_factor_with_yarn_off_is_said_unused(launcher):
    result = launcher.plan("h200_580", env={"VL_MODEL": "ornith", "VL_YARN_FACTOR": "2", "VL_YARN": "off"})
    assert result.option("--max-model-len") == ["262144"] and result.option("--hf-overrides") is None
    assert "unused" in result.decision("yarn-factor")[0]["decision"]
