"""VL_EFFORT_PATCH and VL_EFFORT_BUDGETS: the launcher's thinking-controls policy, through the real command line."""

import json

import pytest

from entrypoint.launcher.catalogue import load_catalogue
from entrypoint.launcher.effort import default_budgets

ENV = "PREBAKE_THINKING"


def policy(result) -> dict | None:
    raw = result.env.get(ENV)
    return json.loads(raw) if raw else None


def test_on_by_default_with_the_table_and_the_models_switch(launcher):
    result = launcher.plan(env={"VL_MODEL": "ornith"})
    assert policy(result) == {"budgets": default_budgets(), "reasoning_off": {"enable_thinking": False},
                              "budget_enforced": True}
    [decision] = result.decision("thinking-controls")
    assert decision["decision"].startswith("on: thinking budgets minimal 1024, low 2048")
    assert 'disabled = chat_template_kwargs {"enable_thinking":false}' in decision["decision"]
    # what makes vLLM enforce thinking_token_budget: its reasoning config comes from the reasoning parser
    assert result.option("--reasoning-parser") == ["qwen3"]


@pytest.mark.parametrize("key", [key for key, model in load_catalogue().items() if model.reasoning_parser])
def test_every_reasoning_model_of_the_catalogue_gets_the_controls(launcher, key):
    result = launcher.plan(profile="rtxpro6000_580", env={"VL_MODEL": key, "VL_SPEC": "off"})
    assert policy(result)["reasoning_off"] == {"enable_thinking": False}
    assert result.option("--reasoning-parser")


@pytest.mark.parametrize("key", [key for key, model in load_catalogue().items() if not model.reasoning_parser])
def test_a_model_that_does_not_reason_is_served_as_vllm_does(launcher, key):
    result = launcher.plan(env={"VL_MODEL": key, "VL_SPEC": "off"})
    assert ENV not in result.env
    [decision] = result.decision("thinking-controls")
    assert decision["decision"] == "off (nothing to control)" and "no reasoning parser" in decision["why"]


def test_a_model_without_a_known_switch_says_how_disabled_works(launcher):
    result = launcher.plan(env={"VL_MODEL": "someone/reasoner"}, args=["--reasoning-parser", "deepseek_r1"])
    assert policy(result)["reasoning_off"] == {}
    [decision] = result.decision("thinking-controls")
    assert "a zero thinking budget" in decision["decision"]


def test_knob_overrides_levels(launcher):
    result = launcher.plan(env={"VL_EFFORT_BUDGETS": "low=512 max=100000"})
    budgets = policy(result)["budgets"]
    assert budgets["low"] == 512 and budgets["max"] == 100000 and budgets["high"] == default_budgets()["high"]
    assert "(VL_EFFORT_BUDGETS)" in result.decision("thinking-controls")[0]["decision"]


@pytest.mark.parametrize("value", ["low", "huge=10", "low=-1", "low=1e3", "low=99999999999"])
def test_a_bad_budget_names_the_knob_and_the_levels(launcher, value):
    result = launcher.run(env={"VL_EFFORT_BUDGETS": value})
    assert result.rc != 0
    assert "VL_EFFORT_BUDGETS" in result.stderr and "minimal|low|medium|high|xhigh|max|adaptive" in result.stderr


def test_off_by_knob_and_a_stray_policy_is_removed(launcher):
    result = launcher.plan(env={"VL_EFFORT_PATCH": "off", ENV: '{"budgets":{}}'})
    assert result.env[ENV] is None
    assert result.decision("thinking-controls")[0]["decision"] == "off"
    assert not [d for d in result.decision("ignored") if d["decision"] == "VL_EFFORT_PATCH"]


RUNNER = "VLLM_USE_V2_MODEL_RUNNER"


def test_dspark_keeps_the_switch_but_sets_no_budget(launcher):
    """DSpark runs only on vLLM's Model Runner V2, which answers every budgeted request with an error."""
    result = launcher.plan(env={"VL_MODEL": "ornith", "VL_SPEC": "dspark"})
    assert policy(result) == {"budgets": default_budgets(), "reasoning_off": {"enable_thinking": False},
                              "budget_enforced": False}
    [decision] = result.decision("thinking-controls")
    assert decision["decision"].startswith('on without budgets: disabled = chat_template_kwargs {"enable_thinking":false}')
    assert "Model Runner V2" in decision["why"]
    [runner] = result.decision("model-runner")
    assert runner["decision"] == "V2 (vLLM's choice)" and RUNNER not in result.env


def test_dspark_from_the_container_arguments_too(launcher):
    config = '{"method":"dspark","model":"RedHatAI/Qwen3.6-35B-A3B-speculator.dspark","num_speculative_tokens":8}'
    result = launcher.plan(env={"VL_MODEL": "ornith"}, args=["--speculative-config", config])
    assert policy(result)["budget_enforced"] is False and RUNNER not in result.env


def test_a_dense_model_with_a_reasoning_parser_is_pinned_to_v1(launcher):
    """vLLM 0.27.1 runs a dense model with V2; on the H200 every /v1/messages request then failed (500)."""
    result = launcher.plan(env={"VL_MODEL": "someone/dense-reasoner"}, args=["--reasoning-parser", "qwen3"])
    assert result.env[RUNNER] == "0" and policy(result)["budget_enforced"] is True
    [runner] = result.decision("model-runner")
    assert runner["decision"] == f"V1 ({RUNNER}=0)" and "nothing in this plan needs V2" in runner["why"]


def test_every_catalogue_model_with_budgets_runs_v1(launcher):
    result = launcher.plan(env={"VL_MODEL": "ornith"})
    assert result.env[RUNNER] == "0" and policy(result)["budget_enforced"] is True


def test_no_pin_without_budgets(launcher):
    for env, args in (({"VL_MODEL": "qwen", "VL_SPEC": "off"}, []), ({"VL_EFFORT_PATCH": "off"}, [])):
        result = launcher.plan(env=env, args=args)
        assert RUNNER not in result.env and not result.decision("model-runner")


@pytest.mark.parametrize("value, enforced", [("1", False), ("0", True)])
def test_the_users_runner_wins(launcher, value, enforced):
    result = launcher.plan(env={"VL_MODEL": "ornith", RUNNER: value})
    assert RUNNER not in result.env and policy(result)["budget_enforced"] is enforced
    assert result.decision("model-runner")[0]["decision"].endswith(f"({RUNNER}={value} in the environment)")


def test_a_bad_runner_variable_is_refused(launcher):
    result = launcher.run(env={"VL_MODEL": "ornith", RUNNER: "yes"})
    assert result.rc != 0 and RUNNER in result.stderr and "0 (its V1 model runner) or 1" in result.stderr


def test_dflash_leaves_the_choice_to_vllm_and_the_plugin(launcher):
    result = launcher.plan(profile="rtxpro6000_580", env={"VL_MODEL": "dense", "VL_SPEC": "dflash"})
    assert RUNNER not in result.env and policy(result)["budget_enforced"] is True
    assert result.decision("model-runner")[0]["decision"] == "vLLM's choice"


def test_prefill_context_parallelism_needs_v2(launcher):
    result = launcher.plan(env={"VL_MODEL": "ornith"}, args=["-pcp", "2"])
    assert RUNNER not in result.env and policy(result)["budget_enforced"] is False
