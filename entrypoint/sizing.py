"""Context length: VL_CTX, or the largest tier the real VRAM holds (bootstrap lines 435-458).

The script sized every model with Ornith's numbers (26 GB of weights, 20 KiB of KV per
token) and applied them before the model was even chosen; here each model brings its own
weight size and KV bytes per token, and the KV dtype scales the latter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalogue import ModelSpec
from .errors import LaunchError
from .probe import Host
from .record import Decision

CONTEXT_TIERS = (1_000_000, 786_432, 524_288, 262_144, 131_072)
MARGIN_MIB = 2000  # the script's margin for CUDA graphs and activations, per replica
SIZING_HEADROOM = 0.03  # the script sized at 0.90 for a 0.93 utilisation
# KV bytes relative to 16 bits. TurboQuant k3v4 measured 12.08 M tokens against 2.79 M in
# bf16 on Ornith (x4.3, close to 16/(3.5)).
KV_SCALE = {"auto": 1.0, "fp8": 0.5, "fp8_e4m3": 0.5, "fp8_e5m2": 0.5,
            "turboquant_k8v4": 12 / 32, "turboquant_k3v4_nc": 7 / 32}


@dataclass(frozen=True)
class ContextChoice:
    max_model_len: int | None  # None: let vLLM derive it from the model's config
    yarn_factor: float | None  # set when YaRN must be applied (always with the long-context switch)
    decisions: tuple[Decision, ...]


def model_limit(model: ModelSpec, yarn_on: bool, factor: float | None) -> int | None:
    if model.native_context is None:
        return None
    if yarn_on and factor:
        return int(model.native_context * factor)
    return model.native_context


def estimate_tokens(model: ModelSpec, host: Host, tp: int, kv_dtype: str, util: float, draft_gib: float) -> tuple[int, str]:
    replica_mib = host.min_memory_mib * tp
    weights_mib = (model.weights_gib + draft_gib) * 1024
    overhead_mib = model.overhead_gib_per_gpu * 1024 * tp
    usable = replica_mib * (util - SIZING_HEADROOM) - weights_mib - MARGIN_MIB - overhead_mib
    usable = max(usable, 2000)  # the script's floor: a tiny KV still leaves the smallest tier
    kv_bytes = model.kv_bytes_per_token * KV_SCALE[kv_dtype]
    tokens = int(usable * 1024 * 1024 // kv_bytes)
    detail = (f"{tp} x {host.min_memory_mib} MiB x {util - SIZING_HEADROOM:.2f} - {weights_mib:.0f} MiB weights"
              f" - {MARGIN_MIB + overhead_mib:.0f} MiB margin = {usable:.0f} MiB of KV at {kv_bytes:.0f} B/token"
              f" ({kv_dtype}) = {tokens} tokens")
    return tokens, detail


def choose_context(model: ModelSpec, host: Host, tp: int, kv_dtype: str, util: float, draft_gib: float,
                   requested: int | None, yarn_on: bool, factor: float | None) -> ContextChoice:
    limit = model_limit(model, yarn_on, factor)
    decisions = []
    if requested is not None:
        if limit is not None and requested > limit:
            hint = ("" if yarn_on or not model.yarn_factor
                    else f" (up to {int(model.native_context * model.yarn_factor)} with VL_YARN=on)")
            raise LaunchError(
                f"VL_CTX={requested} is not valid for model {model.key}: accepted values are 1024 to {limit}"
                f"{hint}; set a smaller VL_CTX.")
        ctx = requested
        decisions.append(Decision("context", f"max-model-len {ctx}", "VL_CTX"))
    elif model.weights_gib is None or model.kv_bytes_per_token is None:
        return ContextChoice(None, None, (Decision(
            "context", "vLLM's default", "model outside the catalogue: weight size and KV bytes per token "
            "unknown, vLLM derives the context from its config (set VL_CTX to choose)"),))
    else:
        tokens, detail = estimate_tokens(model, host, tp, kv_dtype, util, draft_gib)
        ceiling = min(tokens, limit) if limit is not None else tokens
        fitting = [tier for tier in CONTEXT_TIERS if tier <= ceiling]
        if fitting:
            ctx = fitting[0]
            why = f"largest tier <= min(VRAM estimate, model limit {limit}): {detail}"
        else:
            ctx = min(CONTEXT_TIERS[-1], limit) if limit is not None else CONTEXT_TIERS[-1]
            why = (f"smallest tier; the estimate is below it and vLLM may refuse to start "
                   f"(set VL_CTX lower or add GPUs): {detail}")
        decisions.append(Decision("context", f"max-model-len {ctx}", why))

    native = model.native_context
    if native is not None and ctx > native:
        # YaRN and VLLM_ALLOW_LONG_MAX_MODEL_LEN go together or not at all: the switch
        # alone lets vLLM accept the length and RoPE then produces NaN beyond native.
        decisions.append(Decision(
            "yarn", f"rope_scaling yarn factor {factor} over {native}, VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
            f"context {ctx} exceeds the native {native}; limit with YaRN {limit}"))
        return ContextChoice(ctx, factor, tuple(decisions))
    why = ("context within the native length: static YaRN would rescale every position for nothing"
           if native is not None else "model outside the catalogue")
    decisions.append(Decision("yarn", "off", why))
    return ContextChoice(ctx, None, tuple(decisions))
