"""Whether and how the thinking-controls plugin acts for the served model (VL_EFFORT_PATCH), and the effort
table it applies (effort.py: thinking.toml, with VL_EFFORT_BUDGETS's overrides).

The plugin (vllm_plugin/prebake_thinking, installed in the image's venv) reads the policy from
PREBAKE_THINKING; without that variable it changes nothing about thinking (its fixes for long
Claude Code sessions hold regardless: docs/entrypoint.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

# The variable's name is the plugin's: it reads it inside vLLM, where this package is not importable, so the
# plugin's policy module (standard library only, copied into the image with this folder) defines it.
from ..vllm_plugin.prebake_thinking.policy import ENV  # noqa: F401 (decide.py reads it from here)
from .effort import default_budgets
from .report import Decision

if TYPE_CHECKING:
    from .catalogue import ModelSpec
    from .knobs import Settings

def wants_budgets(model: ModelSpec, settings: Settings, user_reasoning_parser: bool) -> bool:
    """Whether the plugin would set thinking budgets: on, for a model with a reasoning parser."""
    return bool(settings.value("VL_EFFORT_PATCH")) and (model.reasoning_parser is not None or user_reasoning_parser)


def decide_thinking(model: ModelSpec, settings: Settings, dspark: bool,
                    user_reasoning_parser: bool, no_budgets: str | None = None) -> tuple[str | None, Decision]:
    """The plugin's policy as PREBAKE_THINKING's value (None: off), and the decision that says why.

    `no_budgets`: why vLLM's model runner will not take a thinking budget (runner.py), None when it
    will; DSpark alone implies V2."""
    if not settings.value("VL_EFFORT_PATCH"):
        return None, Decision("thinking-controls", "off", "VL_EFFORT_PATCH=off: vLLM's own handling (thinking "
                              "ignored on /v1/messages, any effort turns reasoning on)")
    if dspark and no_budgets is None:
        no_budgets = "DSpark runs only on vLLM's Model Runner V2, which refuses thinking_token_budget"
    reasoning = model.reasoning_parser is not None or user_reasoning_parser
    if not reasoning:
        return None, Decision("thinking-controls", "off (nothing to control)",
                              f"model {model.key} has no reasoning parser: it does not reason, or vLLM does not "
                              "know its think tokens, so there is nothing to turn off or bound")
    budgets = default_budgets()
    if settings.is_set("VL_EFFORT_BUDGETS"):
        budgets.update(settings.value("VL_EFFORT_BUDGETS"))
    off = dict(model.reasoning_off)
    enforced = no_budgets is None
    policy = {"budgets": budgets, "reasoning_off": off, "budget_enforced": enforced}
    table = ", ".join(f"{level} {tokens}" for level, tokens in budgets.items())
    switch = f"chat_template_kwargs {json.dumps(off, separators=(',', ':'))}" if off else None
    if not enforced:
        how_off = switch or ("reasoning_effort none (vLLM passes enable_thinking=false to a template that reads "
                             "it; no reasoning switch known for this model)")
        return (json.dumps(policy, separators=(",", ":")),
                Decision("thinking-controls", f"on without budgets: disabled = {how_off}; effort levels and "
                         "budget_tokens not applied",
                         f"{no_budgets}: a request never carries one, so none fails"))
    how_off = switch or ("a zero thinking budget (no reasoning switch known for this model's template: the "
                         "reasoning block is closed at once)")
    source = "VL_EFFORT_BUDGETS" if settings.is_set("VL_EFFORT_BUDGETS") else "thinking.toml"
    return (json.dumps(policy, separators=(",", ":")),
            Decision("thinking-controls", f"on: thinking budgets {table} ({source}); disabled = {how_off}",
                     f"VL_EFFORT_PATCH from {settings.source('VL_EFFORT_PATCH')}; the reasoning parser gives "
                     "vLLM the think start/end tokens that enforce thinking_token_budget"))
