"""The changes to vLLM's classes, each made right after vLLM imports the module that defines them.

Four vLLM modules are touched, none of their files:
- anthropic.protocol: AnthropicMessagesRequest gains a `thinking` field (a subclass under the
  same name, in place before the /v1/messages route is declared with it);
- anthropic.serving: the conversion to a ChatCompletionRequest turns `thinking` into
  reasoning_effort "none" or thinking_token_budget (policy.anthropic_fields), and create_messages
  empties the thinking text of a request with display "omitted" (display.py);
- openai.chat_completion.protocol: ChatCompletionRequest maps reasoning_effort to a budget in
  to_sampling_params and to the model's reasoning switch in build_chat_params, for both APIs;
- v1.engine.input_processor: InputProcessor, built once vLLM's config is final, tells which model
  runner serves (V2 refuses thinking_token_budget) and whether a reasoning config exists; where
  either rules budgets out, the policy stops setting them (runner_check).
A /v1/messages request without `thinking` gets no reasoning (Anthropic's API does not think then);
a chat request without reasoning_effort goes through every step unchanged.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
from dataclasses import replace
from types import ModuleType
from typing import Any, Callable

from . import display
from .policy import ThinkingPolicy, anthropic_fields, sampling_budget, template_kwargs

logger = logging.getLogger("vllm.plugins.prebake_thinking")

ANTHROPIC_PROTOCOL = "vllm.entrypoints.anthropic.protocol"
ANTHROPIC_SERVING = "vllm.entrypoints.anthropic.serving"
ANTHROPIC_ROUTER = "vllm.entrypoints.anthropic.api_router"
CHAT_PROTOCOL = "vllm.entrypoints.openai.chat_completion.protocol"
INPUT_PROCESSOR = "vllm.v1.engine.input_processor"
PATCHED = "_prebake_thinking_original"  # set on each replaced function: its vLLM original

_policy: ThinkingPolicy | None = None


def active_policy() -> ThinkingPolicy:
    assert _policy is not None, "install() sets the policy before any patched code runs"
    return _policy


def patch_anthropic_protocol(module: ModuleType) -> None:
    from pydantic import BaseModel, ConfigDict, Field

    base = module.AnthropicMessagesRequest
    if getattr(base, PATCHED, None) is not None:
        return

    class AnthropicThinking(BaseModel):
        """`thinking` as Anthropic defines it: enabled (budget_tokens), disabled or adaptive."""
        model_config = ConfigDict(extra="allow")
        type: str
        budget_tokens: int | None = Field(default=None, ge=0)

    class AnthropicMessagesRequest(base):  # type: ignore[valid-type, misc]
        __doc__ = base.__doc__
        thinking: AnthropicThinking | None = None

    # Found under vLLM's own name (pickling, the OpenAPI schema), where it now stands.
    for cls in (AnthropicThinking, AnthropicMessagesRequest):
        cls.__module__, cls.__qualname__ = module.__name__, cls.__name__

    setattr(AnthropicMessagesRequest, PATCHED, base)
    module.AnthropicThinking = AnthropicThinking
    module.AnthropicMessagesRequest = AnthropicMessagesRequest
    router = sys.modules.get(ANTHROPIC_ROUTER)  # present but empty while it is the one importing us
    if router is not None and hasattr(router, "create_messages"):  # not under `vllm serve`: plugins load first
        logger.warning("%s was imported before the thinking plugin: /v1/messages keeps dropping `thinking`",
                       ANTHROPIC_ROUTER)


def patch_anthropic_serving(module: ModuleType) -> None:
    serving = module.AnthropicServingMessages
    original = serving.__dict__["_convert_anthropic_to_openai_request"].__func__
    if getattr(original, PATCHED, None) is not None:
        return

    def _convert_anthropic_to_openai_request(cls, anthropic_request, *args, **kwargs):
        request = original(cls, anthropic_request, *args, **kwargs)
        thinking = getattr(anthropic_request, "thinking", None)
        output_config = getattr(anthropic_request, "output_config", None)
        effort = getattr(output_config, "effort", None)
        for name, value in anthropic_fields(thinking.model_dump() if thinking is not None else None, effort,
                                            active_policy()).items():
            setattr(request, name, value)
        return request

    setattr(_convert_anthropic_to_openai_request, PATCHED, original)
    serving._convert_anthropic_to_openai_request = classmethod(_convert_anthropic_to_openai_request)
    display.patch_anthropic_serving(module)  # thinking.display "omitted": the thinking text is not returned


def patch_chat_protocol(module: ModuleType) -> None:
    request_class = module.ChatCompletionRequest
    original_sampling = request_class.to_sampling_params
    original_chat_params = request_class.build_chat_params
    if getattr(original_sampling, PATCHED, None) is not None:
        return

    def to_sampling_params(self, max_tokens, default_sampling_params, *args, **kwargs):
        params = original_sampling(self, max_tokens, default_sampling_params, *args, **kwargs)
        budget = sampling_budget(self.reasoning_effort, self.thinking_token_budget, max_tokens, active_policy())
        if budget != params.thinking_token_budget:
            params.thinking_token_budget = budget
        return params

    def build_chat_params(self, *args, **kwargs):
        kwargs_with_switch = template_kwargs(self.reasoning_effort, self.chat_template_kwargs, active_policy())
        request = self if kwargs_with_switch is None else self.model_copy(
            update={"chat_template_kwargs": kwargs_with_switch})
        return original_chat_params(request, *args, **kwargs)

    setattr(to_sampling_params, PATCHED, original_sampling)
    setattr(build_chat_params, PATCHED, original_chat_params)
    request_class.to_sampling_params = to_sampling_params
    request_class.build_chat_params = build_chat_params


def budgets_refused(vllm_config: Any) -> str | None:
    """Why this engine refuses thinking_token_budget, as vLLM's InputProcessor decides it; None: it takes them."""
    if getattr(vllm_config, "use_v2_model_runner", False):
        return "vLLM runs its Model Runner V2, which refuses thinking_token_budget"
    reasoning = getattr(vllm_config, "reasoning_config", None)
    if reasoning is None or not getattr(reasoning, "enabled", False):
        return "vLLM has no reasoning config (think start/end tokens) to enforce thinking_token_budget"
    return None


def runner_check(vllm_config: Any) -> None:
    """At engine start: budgets only where this engine enforces them (a 500 on every budgeted request otherwise)."""
    global _policy
    if _policy is None or not _policy.budget_enforced:
        return
    why = budgets_refused(vllm_config)
    if why is not None:
        _policy = replace(_policy, budget_enforced=False)
        logger.warning("thinking controls: no thinking budgets (%s); thinking disabled goes through %s", why,
                       dict(_policy.reasoning_off) or "reasoning_effort none")


def patch_input_processor(module: ModuleType) -> None:
    processor = module.InputProcessor
    original = processor.__init__
    if getattr(original, PATCHED, None) is not None:
        return

    def __init__(self, vllm_config, *args, **kwargs):
        original(self, vllm_config, *args, **kwargs)
        runner_check(vllm_config)

    setattr(__init__, PATCHED, original)
    processor.__init__ = __init__


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    ANTHROPIC_PROTOCOL: patch_anthropic_protocol,
    ANTHROPIC_SERVING: patch_anthropic_serving,
    CHAT_PROTOCOL: patch_chat_protocol,
    INPUT_PROCESSOR: patch_input_processor,
}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it wraps the real loader of a module to patch so that the patch runs
    right after the module's code. Modules that no process imports (workers) cost nothing."""

    def __init__(self, pending: dict[str, Callable[[ModuleType], None]]):
        self.pending = pending

    def find_spec(self, name: str, path: Any, target: Any = None):
        if name not in self.pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        patch, loader = self.pending.pop(name), spec.loader
        if not self.pending:
            sys.meta_path.remove(self)
        if loader is None or not hasattr(loader, "exec_module"):
            logger.warning("%s cannot be patched at import (loader %r): thinking controls incomplete", name, loader)
            return spec
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            patch(module)

        loader.exec_module = exec_module  # this loader instance serves this one module
        return spec


def install(policy: ThinkingPolicy) -> None:
    global _policy
    _policy = policy
    after_import(PATCHES)
    logger.info("thinking controls on: budgets %s, reasoning off by %s, budget %s",
                dict(policy.budgets), dict(policy.reasoning_off) or "a zero budget",
                "enforced" if policy.budget_enforced else "not enforced (vLLM's runner or reasoning config takes none)")


# Serving fixes that hold with or without a thinking policy (inline_system.py, lengths.py).
API_SERVER = "vllm.entrypoints.openai.api_server"
SERVER_UTILS = "vllm.entrypoints.serve.utils.server_utils"


def _in_turn(*patches: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
    def patch(module: ModuleType) -> None:
        for each in patches:
            each(module)
    return patch


def after_import(patches: dict[str, Callable[[ModuleType], None]]) -> None:
    """Each patch runs on its module now if it is imported, else right after vLLM imports it. Additive:
    a module some earlier call waits for gets this patch after that call's."""
    finder = next((f for f in sys.meta_path if isinstance(f, _PatchAfterImport)), None)
    for name, patch in patches.items():
        if name in sys.modules:
            patch(sys.modules[name])
            continue
        if finder is None:
            finder = _PatchAfterImport({})
            sys.meta_path.insert(0, finder)
        earlier = finder.pending.get(name)
        finder.pending[name] = patch if earlier is None else _in_turn(earlier, patch)


def install_serving_fixes() -> None:
    """Claude Code's inline system messages keep the prefix cache, and /v1/messages near the context
    limit lowers max_tokens or answers a 400 Claude Code compacts on (after install(): it adds to its hook)."""
    from . import inline_system, lengths

    after_import({
        ANTHROPIC_SERVING: _in_turn(inline_system.patch_anthropic_serving, lengths.patch_anthropic_serving),
        CHAT_PROTOCOL: lengths.patch_chat_protocol,
        SERVER_UTILS: lengths.patch_handlers,
        API_SERVER: lengths.patch_handlers,
    })
    logger.info("serving fixes on: inline system messages folded as reminders, /v1/messages lengths")
