"""Which model runner vLLM will use, and when the launcher pins V1 (VLLM_USE_V2_MODEL_RUNNER=0).

vLLM 0.27.1 picks its runner in config/vllm.py (VllmConfig.use_v2_model_runner): the variable
VLLM_USE_V2_MODEL_RUNNER when set; else V2 for prefill context parallelism, DSpark, a DFlash
draft that mixes sliding-window and full attention, diffusion models, and architectures that are
neither MoE nor hybrid (plus a short list), unless a feature V2 lacks sends it back to V1. V2
refuses every request that carries a thinking_token_budget (v1/engine/input_processor.py: a 500
on /v1/messages), so thinking budgets are set only where V1 runs: the launcher pins V1 when the
plan needs budgets and nothing in it needs V2, and says so; the plugin checks vLLM's real choice
at engine start (prebake_thinking.hooks) for what the launcher cannot see.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

from .report import Decision, LaunchError

ENV = "VLLM_USE_V2_MODEL_RUNNER"
TOPIC = "model-runner"


@dataclass(frozen=True)
class Runner:
    budgets: bool  # thinking_token_budget can be enforced (V1, or vLLM's choice checked by the plugin)
    env: str | None  # the value the launcher gives VLLM_USE_V2_MODEL_RUNNER; None: left as it is
    decision: Decision


def user_runner(env: Mapping[str, str]) -> bool | None:
    """VLLM_USE_V2_MODEL_RUNNER as vLLM reads it (envs.maybe_convert_bool: an integer): True = V2."""
    raw = env.get(ENV)
    if raw is None:
        return None
    try:
        return bool(int(raw))
    except ValueError:
        raise LaunchError(subject=ENV, value=raw, problem=f"{ENV}={raw!r}: vLLM reads it as an integer",
                          fix="accepted values are 0 (its V1 model runner) or 1 (V2); unset it to let the launcher "
                              "choose.") from None


def v2_needed(spec_method: str, user_spec_configs: list[str], pcp_values: list[str]) -> tuple[str | None, bool]:
    """(what in the plan needs V2, whether vLLM forces V2 for it for sure). (None, False): nothing."""
    methods = {spec_method}
    for raw in user_spec_configs:
        try:
            methods.add(str(json.loads(raw).get("method")))
        except (ValueError, AttributeError):
            methods.add("dspark" if "dspark" in raw else "dflash" if "dflash" in raw else "?")
    if "dspark" in methods:
        return "DSpark runs only on vLLM's Model Runner V2", True
    for value in pcp_values:
        if re.fullmatch(r"[0-9]+", value) and int(value) > 1:  # "²".isdigit() is True, and int("²") raises
            return f"prefill context parallelism ({value}) runs only on vLLM's Model Runner V2", True
    if "dflash" in methods:
        # vLLM forces V2 only for a draft whose layers mix sliding-window and full attention: the
        # draft's config is not known here, so vLLM's own choice stands and the plugin reads it.
        return "a DFlash draft that mixes sliding-window and full attention runs only on Model Runner V2", False
    return None, False


def decide_runner(wants_budgets: bool, spec_method: str, user_spec_configs: list[str], pcp_values: list[str],
                  env: Mapping[str, str]) -> Runner:
    """Whether thinking budgets can be set, and the runner the launcher asks vLLM for."""
    chosen = user_runner(env)
    if chosen is not None:
        if chosen:
            return Runner(False, None, Decision(TOPIC, f"V2 ({ENV}=1 in the environment)",
                                                "set by you: V2 refuses thinking_token_budget, so no thinking "
                                                "budget is set; thinking disabled still works where the model "
                                                "has a template switch"))
        return Runner(True, None, Decision(TOPIC, f"V1 ({ENV}=0 in the environment)",
                                           "set by you: thinking budgets are enforced"))
    need, certain = v2_needed(spec_method, user_spec_configs, pcp_values)
    if need and certain:
        return Runner(False, None, Decision(TOPIC, "V2 (vLLM's choice)",
                                            f"{need}, which refuses thinking_token_budget: no thinking budget is "
                                            "set (effort levels not applied); thinking disabled still works "
                                            "where the model has a template switch"))
    if need:
        return Runner(True, None, Decision(TOPIC, "vLLM's choice",
                                           f"{need}: the draft's config decides, so the thinking plugin reads "
                                           "vLLM's choice at engine start and sets budgets only under V1"))
    if not wants_budgets:
        return Runner(True, None, Decision(TOPIC, "vLLM's choice", "no thinking budget to enforce"))
    return Runner(True, "0", Decision(TOPIC, f"V1 ({ENV}=0)",
                                      "thinking budgets (effort levels) need vLLM's V1 model runner: V2 refuses "
                                      "thinking_token_budget (every /v1/messages request with an effort failed, "
                                      "500), and vLLM picks V2 for dense models; nothing in this plan needs V2 "
                                      "(no DSpark, DFlash or prefill context parallelism)"))
