"""The thinking plugin without vLLM: its policy on every request shape, its import hook, its wheel.

What vLLM's own classes do with it runs in the image's self-test (the thinking-controls check),
and here too against a venv with vLLM when PREBAKE_TEST_VLLM_PYTHON names its python.
"""

import importlib.metadata
import json
import os
import runpy
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from entrypoint.launcher.effort import default_budgets
from entrypoint.vllm_plugin.prebake_thinking import hooks
from entrypoint.vllm_plugin.prebake_thinking.policy import (ENV, ThinkingPolicy, anthropic_fields, policy_from_env,
                                                             sampling_budget, template_kwargs)
from prebake.incontainer.programs.thinking_cases import CASES, expected_budget

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "entrypoint" / "vllm_plugin"
PROGRAMS = REPO / "prebake" / "incontainer" / "programs"

QWEN3 = ThinkingPolicy(default_budgets(), {"enable_thinking": False}, True)
NO_SWITCH = ThinkingPolicy(default_budgets(), {}, True)


def engine_view(api: str, body: dict, policy: ThinkingPolicy) -> tuple[int | None, dict | None]:
    """(thinking_token_budget, chat_template_kwargs) as the patched vLLM methods compute them, with
    vLLM's own step (effort -> reasoning_effort) done as vLLM 0.27.1 does it."""
    if api == "messages":
        effort = (body.get("output_config") or {}).get("effort")
        request = {"reasoning_effort": effort, "thinking_token_budget": None, "chat_template_kwargs": None}
        request.update(anthropic_fields(body.get("thinking"), effort, policy))
    else:
        request = {"reasoning_effort": body.get("reasoning_effort"), "chat_template_kwargs": None,
                   "thinking_token_budget": body.get("thinking_token_budget")}
    budget = sampling_budget(request["reasoning_effort"], request["thinking_token_budget"], body["max_tokens"], policy)
    return budget, template_kwargs(request["reasoning_effort"], request["chat_template_kwargs"], policy)


@pytest.mark.parametrize("policy", [QWEN3, NO_SWITCH], ids=["with-switch", "no-switch"])
@pytest.mark.parametrize("name, api, body, expect, same", CASES, ids=[case[0] for case in CASES])
def test_every_claude_code_request_shape(name, api, body, expect, same, policy):
    budget, kwargs = engine_view(api, body, policy)
    assert budget == expected_budget(expect, body["max_tokens"], dict(policy.budgets), dict(policy.reasoning_off))
    reasoning_off = expect[0] == "off" and bool(policy.reasoning_off)
    assert (kwargs == {"enable_thinking": False}) is reasoning_off
    if same:
        assert budget is None and kwargs is None


def test_claude_codes_default_gets_the_high_budget():
    default = CASES[0][2]
    assert default["thinking"] == {"type": "adaptive"} and default["output_config"] == {"effort": "high"}
    assert engine_view("messages", default, QWEN3) == (16384, None)


def test_a_model_without_a_reasoning_config_never_gets_a_budget():
    unenforced = ThinkingPolicy(default_budgets(), {}, budget_enforced=False)
    for _, api, body, _, _ in CASES:  # vLLM answers 400 to a budget it cannot enforce
        assert engine_view(api, body, unenforced)[0] is body.get("thinking_token_budget")


def test_the_clients_own_template_kwargs_win():
    assert template_kwargs("none", {"enable_thinking": True}, QWEN3) is None
    assert template_kwargs("none", {"x": 1}, QWEN3) == {"enable_thinking": False, "x": 1}


@pytest.mark.parametrize("raw", ["{", '{"budgets": {"low": 1}}', '{"budgets": {"adaptive": -1}, "budget_enforced": true}'])
def test_a_bad_policy_names_the_variable(raw):
    with pytest.raises(ValueError, match=ENV):
        policy_from_env({ENV: raw})


def test_no_policy_means_the_plugin_stays_off():
    assert policy_from_env({}) is None and policy_from_env({ENV: ""}) is None


def test_a_module_is_patched_right_after_its_import(tmp_path, monkeypatch):
    (tmp_path / "prebake_fake_vllm_module.py").write_text("class Request:\n    field = 'vllm'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def patch(module):
        seen.append(module.Request.field)
        module.Request.field = "patched"

    finder = hooks._PatchAfterImport({"prebake_fake_vllm_module": patch})
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    import prebake_fake_vllm_module

    assert seen == ["vllm"] and prebake_fake_vllm_module.Request.field == "patched"
    assert finder not in sys.meta_path  # its work done, it leaves
    monkeypatch.delitem(sys.modules, "prebake_fake_vllm_module")


def test_the_plugin_installs_as_a_distribution_with_its_entry_point(tmp_path):
    # templates/files/ is the image build's folder of loose files, no package: its script read as the build runs it
    build_wheel = runpy.run_path(str(REPO / "templates" / "files" / "install_plugin.py"))["build_wheel"]
    wheel = build_wheel(str(PLUGIN_DIR), str(tmp_path))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"prebake_thinking/__init__.py", "prebake_thinking/hooks.py", "prebake_thinking/policy.py"} <= names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    wheel], check=True)
    [dist] = importlib.metadata.distributions(path=[str(target)])
    assert dist.metadata["Name"] == "prebake-thinking"
    [entry] = [ep for ep in dist.entry_points if ep.group == "vllm.general_plugins"]
    assert entry.value == "prebake_thinking:register"


VLLM_PYTHON = os.environ.get("PREBAKE_TEST_VLLM_PYTHON")


@pytest.mark.skipif(not VLLM_PYTHON, reason="PREBAKE_TEST_VLLM_PYTHON (a venv with vllm==0.27.1) is not set")
@pytest.mark.parametrize("plugins", ["loaded", "none"])
def test_vllms_own_classes_with_and_without_the_plugin(plugins):
    """The self-test's program against a venv with vLLM 0.27.1 (CPU torch will do), where the
    plugin is installed (`python templates/files/install_plugin.py entrypoint/vllm_plugin`)."""
    env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR", **({"VLLM_PLUGINS": "none"} if plugins == "none" else {}))
    done = subprocess.run([VLLM_PYTHON, str(PROGRAMS / "thinking_controls.py"), str(REPO / "entrypoint")],
                          env=env, capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    failed = {item["case"] for item in report["results"] if not item["ok"]}
    if plugins == "loaded":
        assert done.returncode == 0 and not failed, report
    else:  # vLLM alone: every case with a control fails, those without hold
        assert done.returncode == 1 and report["plugin"] == "not loaded"
        unchanged = {"chat completions: reasoning_effort none",  # vLLM itself sets enable_thinking false
                     "claude-code --effort max",  # max_tokens bounds these two: no budget, as without the plugin
                     "budget_tokens beyond max_tokens"}
        controlled = {name for name, _, _, expect, _ in CASES if expect[0] != "none"}
        assert failed == (controlled - unchanged) | {"display omitted"}


class _Reasoning:
    enabled = True


@pytest.mark.parametrize("v2, reasoning, refused", [(True, _Reasoning(), True), (False, None, True),
                                                     (False, _Reasoning(), False)])
def test_the_engine_start_check_sets_budgets_only_where_vllm_takes_them(monkeypatch, v2, reasoning, refused):
    """vLLM's InputProcessor refuses thinking_token_budget under Model Runner V2 (a 500 on every
    /v1/messages request with an effort) and without a reasoning config: the plugin reads both
    from the real config when vLLM builds the InputProcessor."""
    from types import ModuleType, SimpleNamespace

    monkeypatch.setattr(hooks, "_policy", NO_SWITCH)
    module = ModuleType("fake_input_processor")

    class InputProcessor:
        def __init__(self, vllm_config, renderer=None):
            self.vllm_config = vllm_config

    module.InputProcessor = InputProcessor
    hooks.patch_input_processor(module)
    hooks.patch_input_processor(module)  # twice: patched once
    InputProcessor(SimpleNamespace(use_v2_model_runner=v2, reasoning_config=reasoning))
    policy = hooks.active_policy()
    assert policy.budget_enforced is not refused
    for name, api, body, expect, _ in CASES:
        budget, kwargs = engine_view(api, body, policy)
        if refused:  # no request carries a budget the engine refuses; none fails
            assert budget is body.get("thinking_token_budget"), name
        else:
            assert budget == expected_budget(expect, body["max_tokens"], dict(policy.budgets), {}), name


def test_display_omitted_returns_thinking_blocks_without_their_text():
    """thinking.display "omitted" (Claude Code 2.1.332's -p) or "updates" (interactive, where Anthropic fills only
    progress notes, which an open model does not write): Anthropic returns the thinking block with an empty
    text and its signature. The events are as vLLM 0.27.1's message_stream_converter writes them (pydantic's
    compact JSON, wrap_data_with_event); a text that quotes the marker is escaped and stays."""
    import asyncio
    from types import ModuleType, SimpleNamespace

    from entrypoint.vllm_plugin.prebake_thinking import display

    events = ['event: content_block_start\ndata: {"type":"content_block_start","content_block":{"type":"thinking",'
              '"thinking":""},"index":0}\n\n',
              'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"thinking_delta",'
              '"thinking":"secret plan"},"index":0}\n\n',
              'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"signature_delta",'
              '"signature":"ab12"},"index":0}\n\n',
              'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta",'
              '"text":"\\"delta\\":{\\"type\\":\\"thinking_delta\\""},"index":1}\n\n']

    async def stream():
        for event in events:
            yield event

    module = ModuleType("fake_serving")

    class AnthropicServingMessages:
        async def create_messages(self, request, raw_request=None):
            if request.stream:
                return stream()
            return SimpleNamespace(content=[SimpleNamespace(type="thinking", thinking="secret plan", signature="s"),
                                            SimpleNamespace(type="text", text="hi")])

    module.AnthropicServingMessages = AnthropicServingMessages
    display.patch_anthropic_serving(module)
    display.patch_anthropic_serving(module)  # twice: patched once

    async def ask(shown, stream_it):
        thinking = SimpleNamespace(type="adaptive", model_extra={} if shown is None else {"display": shown})
        result = await AnthropicServingMessages().create_messages(SimpleNamespace(thinking=thinking, stream=stream_it))
        return [event async for event in result] if stream_it else result.content

    assert asyncio.run(ask("omitted", True)) == [events[0], events[2], events[3]]
    assert asyncio.run(ask("updates", True)) == [events[0], events[2], events[3]]  # no progress notes to show
    assert asyncio.run(ask("summarized", True)) == events and asyncio.run(ask(None, True)) == events
    omitted = asyncio.run(ask("omitted", False))
    assert (omitted[0].thinking, omitted[0].signature, omitted[1].text) == ("", "s", "hi")
    assert asyncio.run(ask(None, False))[0].thinking == "secret plan"
