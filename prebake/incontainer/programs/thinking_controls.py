"""Claude Code's thinking controls through vLLM's own classes, with the plugins vLLM loads; no GPU.

    python thinking_controls.py [ENTRYPOINT_DIR]      (default /opt/prebake/entrypoint)
    python thinking_controls.py --launcher-inputs [ENTRYPOINT_DIR]    (what it takes from the launcher; no vLLM)

For each catalogue model that reasons, with the policy its launcher gives it: each request of
thinking_cases.py goes through the /v1/messages route's request class, vLLM's Anthropic
conversion, ChatCompletionRequest.build_chat_params (the template's kwargs) and
to_sampling_params; then vLLM's ReasoningConfig, set up from the model's reasoning parser as
`--reasoning-parser` does, and its ThinkingBudgetStateHolder (what the V1 sampler applies) must
force the think-end token exactly when the budget is spent. Prints one JSON object
{"ok": bool, "plugin": ..., "results": [{"case", "model", "ok", "detail"}]}; exit status 1 when
a case fails. With VLLM_PLUGINS=none (no plugin loaded) the controlled cases fail: what vLLM
0.27.1 does alone.
"""

from __future__ import annotations

import json
import os
import sys

from entrypoint_door import image_module
from registry_fork import inspect_in_a_fork
from thinking_cases import CASES, expected_budget, without_controls

PATCHED = "_prebake_thinking_original"  # prebake_thinking.hooks.PATCHED; read here with or without the plugin
THINK_START, THINK_END, FILLER, VOCAB = 11, 12, 13, 64
# The decode loop on CPU costs ~budget² list scans in vLLM's state holder: the cases with small
# budgets prove the enforcement, the others the budget the request carries.
ENFORCED_UP_TO = 512


class FakeTokenizer:
    """Enough of a tokenizer for a reasoning parser and ReasoningConfig: no model files in the image."""

    def __init__(self) -> None:
        words = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_start|>", "<|im_end|>"]
        self.vocab = {word: THINK_START + i for i, word in enumerate(words)}

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.vocab[text]] if text in self.vocab else []


def launcher_inputs(entrypoint_dir: str) -> dict:
    """All this program takes from the image's launcher (standard library only, no vLLM): {"policies": {model
    key: PREBAKE_THINKING policy and reasoning parser}, for each catalogue model the launcher gives one by default;
    "runners": [{"model", "method", "env", "thinking"}], the launcher's runner variable and thinking policy for
    each model that reasons and each speculation method it allows}. `--launcher-inputs` prints it: the check
    keeps vLLM's outcome on these inputs (checks/thinking_controls.py)."""
    catalogue, knobs, thinking, runner = (image_module(entrypoint_dir, f"launcher.{name}")
                                          for name in ("catalogue", "knobs", "thinking", "runner"))
    settings = knobs.resolve({}, {})
    policies, runners = {}, []
    for key, model in catalogue.load_catalogue().items():
        raw, _ = thinking.decide_thinking(model, settings, dspark=False, user_reasoning_parser=False)
        if raw is not None:
            policies[key] = json.loads(raw) | {"reasoning_parser": model.reasoning_parser}
        if not model.reasoning_parser:
            continue
        for method in sorted(set(model.speculation_allowed) | {"off"}):
            plan = runner.decide_runner(True, method, [], [], {})
            raw, _ = thinking.decide_thinking(model, settings, method == "dspark", False,
                                              None if plan.budgets else plan.decision.why)
            runners.append({"model": key, "method": method, "env": plan.env, "thinking": json.loads(raw)})
    return {"policies": policies, "runners": runners}


# Architectures whose config is known here: the GPU harness's tiny models (benchmarks/gpu/), which
# vLLM must run with V2 (dense) and V1 (MoE). The catalogue's configs are not in the image: for
# those, what is proved is vLLM's choice under the runner variable the launcher sets.
KNOWN_ARCHITECTURES = {"Qwen3ForCausalLM": ("V2", False), "Qwen3MoeForCausalLM": ("V1", True)}  # (runner, MoE)


class RunnerStandIn:
    """Just what VllmConfig.use_v2_model_runner reads, with vLLM's own property and helpers."""

    def __init__(self, vllm_config_class, architecture: str, moe: bool, hybrid: bool, spec_method: str) -> None:
        from types import SimpleNamespace

        self.parallel_config = SimpleNamespace(prefill_context_parallel_size=1)
        self.speculative_config = None if spec_method == "off" else SimpleNamespace(
            method=spec_method, draft_model_config=None, parallel_drafting=False)
        self.model_config = SimpleNamespace(runner_type="generate", architectures=[architecture], is_hybrid=hybrid,
                                            is_attention_free=False, is_moe=moe, is_diffusion=False)
        self._class = vllm_config_class

    def __getattr__(self, name):  # vLLM's methods, run on this object
        return getattr(self._class, name).__get__(self)

    def _get_v2_model_runner_unsupported_features(self) -> list[str]:
        return []  # the features the launcher turns on are all V2's (checked on the GPU by benchmarks/gpu/)

    def runner(self, env_value: str | None) -> str:
        previous = os.environ.pop(RUNNER_ENV, None)
        if env_value is not None:
            os.environ[RUNNER_ENV] = env_value
        try:
            return "V2" if self._class.__dict__["use_v2_model_runner"].fget(self) else "V1"
        finally:
            os.environ.pop(RUNNER_ENV, None)
            if previous is not None:
                os.environ[RUNNER_ENV] = previous


RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"  # the launcher's runner.ENV


def no_budget_anywhere(policy: dict, classes) -> str | None:
    """Under V2 (which refuses thinking_token_budget): None when no Claude Code request shape carries a budget."""
    from prebake_thinking.hooks import install
    from prebake_thinking.policy import policy_from_env

    install(policy_from_env({"PREBAKE_THINKING": json.dumps(policy)}))
    request_class, serving, chat_class = classes
    for name, api, body, _, _ in CASES:
        request = (chat_class.model_validate(body) if api == "chat" else
                   serving._convert_anthropic_to_openai_request(request_class.model_validate(body),
                                                                merge_inline_system=True))
        budget = chat_class.to_sampling_params(request, body["max_tokens"], {}).thinking_token_budget
        if budget is not None:
            return f"{name}: thinking_token_budget {budget}, which V2 refuses (500)"
    return None


def runner_results(runners: list[dict], classes, loaded: bool) -> list[dict]:
    """vLLM's own runner choice (config/vllm.py) against the launcher's: a budget only where V1 runs."""
    from vllm.config.vllm import VllmConfig
    from vllm.model_executor.models import registry
    from vllm.model_executor.models.registry import ModelRegistry

    registry._run_in_subprocess = inspect_in_a_fork

    results = []
    for architecture, (expected, moe) in KNOWN_ARCHITECTURES.items():
        info = ModelRegistry._try_inspect_model_cls(architecture)
        stand_in = RunnerStandIn(VllmConfig, architecture, moe, bool(info and info.is_hybrid), "off")
        chosen = "V2" if stand_in._is_default_v2_model_runner_model() else "V1"
        results.append({"case": f"vLLM's default runner for {architecture}", "model": architecture,
                        "ok": chosen == expected, "detail": "ok" if chosen == expected else
                        f"vLLM picks {chosen}, the GPU harness expects {expected}"})
    for item in runners:
        method, enforced = item["method"], item["thinking"]["budget_enforced"]
        # the catalogue's architecture is not known here: as a dense model, vLLM's V2 default
        chosen = RunnerStandIn(VllmConfig, "UnknownDenseForCausalLM", False, False, method).runner(item["env"])
        if method == "dflash" and item["env"] is None:
            problem = None  # vLLM's choice rests on the draft's config: the plugin reads it at engine start
        elif enforced and chosen == "V2":
            problem = f"budgets set, but vLLM runs V2 ({RUNNER_ENV}={item['env']}): every budgeted request fails"
        elif not enforced and chosen == "V1":
            problem = "no budgets although vLLM runs V1"
        elif not enforced and loaded:
            problem = no_budget_anywhere(item["thinking"], classes)
        else:
            problem = None
        results.append({"case": f"runner with VL_SPEC={method}: {chosen}, budgets {'on' if enforced else 'off'}",
                        "model": item["model"], "ok": problem is None, "detail": problem or "ok"})
    return results


def reasoning_config(parser: str):
    """vLLM's ReasoningConfig as `--reasoning-parser PARSER` makes it, over the fake tokenizer."""
    import vllm.config.reasoning as reasoning

    reasoning.cached_tokenizer_from_config = lambda model_config: FakeTokenizer()
    config = reasoning.ReasoningConfig(reasoning_parser=parser)
    config.initialize_token_ids(None)
    return config


def forced_end_after(params, config) -> int | None:
    """Decode steps on CPU logits that always prefer to keep thinking: how many thinking tokens
    vLLM's ThinkingBudgetStateHolder lets through before it forces the think-end token."""
    import torch
    import vllm.utils.torch_utils
    from vllm.v1.sample.logits_processor.interface import BatchUpdate
    from vllm.v1.sample.thinking_budget_state import ThinkingBudgetStateHolder

    vllm.utils.torch_utils.PIN_MEMORY = False  # no GPU here: plain host tensors
    holder = ThinkingBudgetStateHolder(config, 1, 0, torch.device("cpu"), False)
    prompt = [1, 2, 3, *config.reasoning_start_token_ids]  # the generation prompt opens the block
    output: list[int] = []
    holder.sync_batch(BatchUpdate(batch_size=1, removed=[], added=[(0, params, prompt, output)], moved=[]))
    for _ in range(params.thinking_token_budget + 8):
        holder.update_state([output], None)
        logits = torch.zeros(1, VOCAB)
        logits[0, FILLER] = 10.0
        token = int(holder.apply_to_logits(logits, False, None).argmax())
        if token in config.reasoning_end_token_ids:
            return len(output)
        output.append(token)
    return None


def run_case(name, api, body, expect, same, policy, classes) -> str | None:
    """None when the case holds, else what is wrong."""
    request_class, serving, chat_class = classes
    merge = True  # the Qwen templates' system-first guard; what vLLM detects for them

    def convert(payload, vanilla=False):
        if api == "chat":
            return chat_class.model_validate(payload)
        cls = getattr(request_class, PATCHED, request_class) if vanilla else request_class
        function = serving._convert_anthropic_to_openai_request
        if vanilla:
            function = getattr(function.__func__, PATCHED, function.__func__).__get__(serving)
        return function(cls.model_validate(payload), merge_inline_system=merge)

    def chat_params(request, vanilla=False):
        build = chat_class.build_chat_params
        build = getattr(build, PATCHED, build) if vanilla else build
        return build(request, None, "auto")

    def sampling(request, vanilla=False):
        method = chat_class.to_sampling_params
        method = getattr(method, PATCHED, method) if vanilla else method
        return method(request, body["max_tokens"], {})

    request = convert(body)
    params, rendered = sampling(request), chat_params(request)
    kwargs = rendered.chat_template_kwargs or {}
    off = dict(policy["reasoning_off"])
    want = expected_budget(expect, body["max_tokens"], policy["budgets"], off)
    if params.thinking_token_budget != want:
        return f"thinking_token_budget {params.thinking_token_budget}, expected {want}"
    reasoning_is_off = all(kwargs.get(key) == value for key, value in off.items()) if off else False
    if expect[0] == "off" and off and not reasoning_is_off:
        return f"chat_template_kwargs {kwargs} lack the model's reasoning switch {off}"
    if expect[0] != "off" and off and reasoning_is_off:
        return f"reasoning turned off ({kwargs}) for a request that did not ask for it"
    if same:
        vanilla = convert(body, vanilla=True)
        if request.model_dump_json(exclude={"request_id"}) != vanilla.model_dump_json(exclude={"request_id"}):
            return "the converted request differs from vLLM's own"
        if repr(params) != repr(sampling(vanilla, vanilla=True)):
            return "the sampling parameters differ from vLLM's own"
        if rendered != chat_params(vanilla, vanilla=True):
            return "the chat template's arguments differ from vLLM's own"
    # Prefix caching: the prompt may differ from the same request without controls only where the
    # template reads the reasoning switch (its kwargs), never in messages, tools or system text.
    bare_request = convert(without_controls(body))
    bare = chat_params(bare_request)
    if request.messages != bare_request.messages or request.tools != bare_request.tools:
        return "the messages or tools differ from the same request without thinking controls"
    for field in ("chat_template", "chat_template_content_format", "tool_choice", "response_format"):
        if getattr(rendered, field, None) != getattr(bare, field, None):
            return f"{field} differs from the same request without thinking controls"
    changed = {k for k in set(kwargs) | set(bare.chat_template_kwargs or {})
               if kwargs.get(k) != (bare.chat_template_kwargs or {}).get(k)}
    if not changed <= set(off) | {"reasoning_effort", "enable_thinking"}:
        return f"chat_template_kwargs {sorted(changed)} differ beyond the reasoning switch"
    inline_system = [m for m in body["messages"] if m.get("role") == "system"]
    if api == "messages" and inline_system:
        # A template that takes system messages anywhere keeps Claude Code's inline one where it was.
        function = serving._convert_anthropic_to_openai_request
        in_place = function(request_class.model_validate(body), merge_inline_system=False)
        if not any(m.get("role") == "system" and m.get("content") == inline_system[0]["content"]
                   for m in in_place.messages[1:]):
            return "the role: system message inside messages was lost"
    if name.startswith("background hook") and request.response_format is None:
        return "the json_schema output format was lost"
    if want is not None and want <= ENFORCED_UP_TO:
        config = reasoning_config(policy["reasoning_parser"])
        forced = forced_end_after(params, config)
        if forced != want:
            return f"vLLM's thinking-budget state forced the think end after {forced} tokens, not {want}"
    return None


def display_result(serving, loaded: bool) -> dict:
    """display "omitted": vLLM's own serialised thinking delta is the one event the plugin drops."""
    if not loaded:
        return {"case": "display omitted", "model": "-", "ok": False, "detail": "the plugin is not loaded"}
    from prebake_thinking.display import THINKING_DELTA
    from vllm.entrypoints.anthropic.protocol import AnthropicDelta, AnthropicStreamEvent
    from vllm.entrypoints.anthropic.serving import wrap_data_with_event

    def event(delta):
        chunk = AnthropicStreamEvent(index=0, type="content_block_delta", delta=delta)
        return wrap_data_with_event(chunk.model_dump_json(exclude_unset=True), "content_block_delta")

    thinking = event(AnthropicDelta(type="thinking_delta", thinking="plan"))
    forged = event(AnthropicDelta(type="text_delta", text=THINKING_DELTA))
    patched, method = False, serving.create_messages
    while method is not None and not patched:  # the plugin's wrappers, each keeping the one it wraps
        patched = getattr(method, "_prebake_display_original", None) is not None
        method = next((value for key, value in vars(method).items() if key.startswith("_prebake") and callable(value)),
                      None)
    problem = (None if patched and THINKING_DELTA in thinking and THINKING_DELTA not in forged else
               f"create_messages patched: {patched}; vLLM's thinking delta {thinking!r}; a text quoting it {forged!r}")
    return {"case": "display omitted", "model": "-", "ok": problem is None, "detail": problem or "ok"}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--launcher-inputs"]:
        print(json.dumps(launcher_inputs(argv[1] if argv[1:] else "/opt/prebake/entrypoint")), flush=True)
        return 0
    inputs = launcher_inputs(argv[0] if argv else "/opt/prebake/entrypoint")
    policies = inputs["policies"]
    first = next(iter(policies.values()))
    os.environ["PREBAKE_THINKING"] = json.dumps({k: v for k, v in first.items() if k != "reasoning_parser"})

    from vllm.plugins import load_general_plugins

    load_general_plugins()  # what `vllm serve` does before it builds the server
    from vllm.entrypoints.anthropic import api_router
    from vllm.entrypoints.anthropic.serving import AnthropicServingMessages
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    # The model FastAPI validates /v1/messages bodies with: it must be the one that keeps `thinking`.
    [route] = [route for route in api_router.router.routes if getattr(route, "path", None) == "/v1/messages"]
    route_request_class = route.body_field.field_info.annotation
    loaded = "prebake_thinking.hooks" in sys.modules
    classes = (route_request_class, AnthropicServingMessages, ChatCompletionRequest)
    results = []
    for key, policy in policies.items():
        if loaded:  # every model's policy on the same patched classes (register() read the first one)
            from prebake_thinking.hooks import install
            from prebake_thinking.policy import policy_from_env

            install(policy_from_env({"PREBAKE_THINKING": json.dumps(
                {k: v for k, v in policy.items() if k != "reasoning_parser"})}))
        config = reasoning_config(policy["reasoning_parser"])
        if not config.enabled:
            results.append({"case": "reasoning config", "model": key, "ok": False,
                            "detail": f"--reasoning-parser {policy['reasoning_parser']} gives vLLM no think "
                                      "start/end tokens: thinking_token_budget would be refused (400)"})
            continue
        for name, api, body, expect, same in CASES:
            try:
                problem = run_case(name, api, body, expect, same, policy, classes)
            except Exception as err:  # a crash is a failed case, with its reason
                problem = f"{err.__class__.__name__}: {err}"
            results.append({"case": name, "model": key, "ok": problem is None, "detail": problem or "ok"})
    results += runner_results(inputs["runners"], classes, loaded)
    results.append(display_result(AnthropicServingMessages, loaded))
    ok = bool(results) and all(item["ok"] for item in results)
    print(json.dumps({"ok": ok, "plugin": "loaded" if loaded else "not loaded", "models": list(policies),
                      "results": results}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
