"""What a request's thinking controls become, as pure functions (standard library only).

The launcher writes the served model's policy into PREBAKE_THINKING as JSON:
  {"budgets": {"low": 2048, ..., "adaptive": 16384},  thinking tokens per effort level
   "reasoning_off": {"enable_thinking": false},        chat_template_kwargs that turn reasoning off ({} = none known)
   "budget_enforced": true}                            the server has a reasoning config (think start/end tokens)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

ENV = "PREBAKE_THINKING"
NO_REASONING = "none"  # the reasoning_effort that means: do not reason
ADAPTIVE = "adaptive"  # the budget of thinking {"type": "adaptive"} sent without an effort


@dataclass(frozen=True)
class ThinkingPolicy:
    budgets: Mapping[str, int]
    reasoning_off: Mapping[str, Any] = field(default_factory=dict)
    budget_enforced: bool = True


def policy_from_env(env: Mapping[str, str]) -> ThinkingPolicy | None:
    raw = env.get(ENV, "")
    if not raw:
        return None
    try:
        data = json.loads(raw)
        budgets = {str(level): int(tokens) for level, tokens in data["budgets"].items()}
        policy = ThinkingPolicy(budgets, dict(data.get("reasoning_off") or {}), bool(data["budget_enforced"]))
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ValueError(f"{ENV}={raw!r} is not a thinking policy ({err}): the launcher writes it; unset it "
                         "to serve without the thinking controls, or start the container through its entrypoint.") from None
    if ADAPTIVE not in budgets or any(tokens < 0 for tokens in budgets.values()):
        raise ValueError(f"{ENV}={raw!r}: budgets must hold {ADAPTIVE!r} and no negative value")
    return policy


def anthropic_fields(thinking: Mapping[str, Any] | None, effort: str | None,
                     policy: ThinkingPolicy) -> dict[str, Any]:
    """ChatCompletionRequest fields that a /v1/messages request's `thinking` sets, beyond vLLM's own
    conversion (which already copies output_config.effort into reasoning_effort). {} = none.

    Anthropic's semantics: without a `thinking` field the model does not think, whatever the effort
    (effort alone shapes the answer, which an open model has no control for); `disabled` likewise.
    Claude Code sends no `thinking` with MAX_THINKING_TOKENS=0 or CLAUDE_CODE_DISABLE_THINKING=1,
    yet still an effort (2.1.332)."""
    kind = (thinking or {}).get("type")
    if thinking is None or kind == "disabled":
        return {"reasoning_effort": NO_REASONING}
    if not policy.budget_enforced:
        return {}  # vLLM answers 400 to a budget that no reasoning config enforces
    if kind == "enabled":
        tokens = (thinking or {}).get("budget_tokens")
        return {"thinking_token_budget": tokens if isinstance(tokens, int) else policy.budgets[ADAPTIVE]}
    if kind == ADAPTIVE and effort is None:
        return {"thinking_token_budget": policy.budgets[ADAPTIVE]}
    return {}  # an effort (alone or with adaptive) goes through reasoning_effort, as on /v1/chat/completions


def sampling_budget(reasoning_effort: str | None, requested_budget: int | None, max_tokens: int | None,
                    policy: ThinkingPolicy) -> int | None:
    """SamplingParams.thinking_token_budget for a chat request (vLLM's own: requested_budget).

    A budget at or above max_tokens could never bite: none is set, since max_tokens bounds the
    thinking already and vLLM would only pay for following the request at every decoding step
    (its budget state scans the output in Python)."""
    if not policy.budget_enforced:
        return requested_budget  # vLLM's value, and vLLM's 400 where no reasoning config enforces it
    if requested_budget is not None:
        budget = requested_budget
    elif reasoning_effort == NO_REASONING:
        # Without a template switch, a budget of 0 closes the reasoning block at once.
        budget = None if policy.reasoning_off else 0
    elif reasoning_effort is not None:
        budget = policy.budgets.get(reasoning_effort)
    else:
        budget = None
    if budget is not None and max_tokens is not None and budget >= max_tokens:
        return None
    return budget


def template_kwargs(reasoning_effort: str | None, requested: Mapping[str, Any] | None,
                    policy: ThinkingPolicy) -> dict[str, Any] | None:
    """chat_template_kwargs with the model's reasoning switch when reasoning is off; None = unchanged.
    A key the client set itself wins."""
    if reasoning_effort != NO_REASONING or not policy.reasoning_off:
        return None
    merged = {**policy.reasoning_off, **(requested or {})}
    return None if merged == dict(requested or {}) else merged
