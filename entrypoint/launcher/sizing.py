"""Context length: VL_CTX, or the largest tier the KV pool of this host holds.

The script sized every model with Ornith's numbers (26 GB of weights, 20 KiB of KV per
token, 0.90 and 2000 MiB of margin) before the model was even chosen (lines 435-458). Here
the KV pool is estimated as vLLM computes it, per replica:

    TP x (GPU GiB x utilisation - non-KV memory per GPU) - weights - draft weights

with each model's weights, KV bytes per token, non-KV memory and per-request state from the
catalogue, calibrated on every figure the script measured (tests/launcher/calibration.toml,
docs/entrypoint.md). A context fits when one request of that length, its attention KV plus
the recurrent state pages a hybrid model adds, fits the pool with FIT_MARGIN to spare.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalogue import ModelSpec
from .report import Decision, LaunchError
from .probe import Host

GIB = 1024 ** 3
CONTEXT_TIERS = (1_000_000, 786_432, 524_288, 262_144, 131_072)
# KV bytes relative to 16 bits. TurboQuant k3v4 measured 12.08 M tokens from the pool that held
# 2.79 M in bf16 on Ornith (2x A40): 0.232, not the nominal 7/32 (block padding, scales).
# k8v4 was never measured: its nominal 12/32 times the same 1.06 of overhead.
KV_SCALE = {"auto": 1.0, "fp8": 0.5, "fp8_e4m3": 0.5, "fp8_e5m2": 0.5,
            "turboquant_k8v4": 0.397, "turboquant_k3v4_nc": 0.232}
# Non-KV memory per GPU that speculation adds (draft weights aside), measured on Ornith, 2x A40
# TP 2: ngram (24 tokens, 64 sequences: verification logits over a 248 k vocabulary) 2.82 M
# -> 2.56 M tokens; MTP n=2 (head weights, its attention layer, buffers) 2.84 M -> 2.41 M;
# DSpark at 0.93 2.79 M -> 2.61 M with its draft. DFlash was never measured: DSpark's figure.
SPEC_GIB_PER_GPU = {"off": 0.0, "ngram": 2.3, "mtp": 3.7, "dspark": 1.05, "dflash": 1.05}
# Ornith's token counts varied 2.70-2.84 M between runs of one configuration (+-2.5 %).
FIT_MARGIN = 0.02


@dataclass(frozen=True)
class Pool:
    """The KV pool of one replica, as vLLM will size it."""

    kv_gib: float
    bytes_per_token: float
    request_state_gib: float
    detail: str

    @property
    def tokens(self) -> int:
        return int(self.kv_gib * GIB // self.bytes_per_token) if self.kv_gib > 0 else 0

    def need_gib(self, context: int) -> float:
        """Memory vLLM checks one request of `context` tokens against at start."""
        return context * self.bytes_per_token / GIB + self.request_state_gib

    def fits(self, context: int) -> bool:
        return self.need_gib(context) <= self.kv_gib * (1 - FIT_MARGIN)


@dataclass(frozen=True)
class ContextChoice:
    max_model_len: int | None  # None: let vLLM derive it from the model's config
    yarn_factor: float | None  # set when YaRN must be applied (always with the long-context switch)
    decisions: tuple[Decision, ...]


def non_kv_gib_per_gpu(model: ModelSpec, tp: int, spec_method: str) -> float:
    tp_extra = model.overhead_tp_gib_per_gpu if tp > 1 else 0.0
    return model.overhead_gib_per_gpu + tp_extra + SPEC_GIB_PER_GPU.get(spec_method, 0.0)


def kv_pool(model: ModelSpec, gpu_mib: int, tp: int, kv_dtype: str, util: float,
            spec_method: str = "off", draft_gib: float = 0.0, mamba_cache_all: bool = False) -> Pool:
    """The pool of one replica of `tp` GPUs of `gpu_mib` each (the smallest GPU of the host).

    mamba_cache_all: `--mamba-cache-mode all` keeps a state page of every recurrent-layer group
    for every cached block, so each token costs (1 + state_groups) pages instead of one."""
    gpu_gib = gpu_mib / 1024
    non_kv = non_kv_gib_per_gpu(model, tp, spec_method)
    kv_gib = tp * (gpu_gib * util - non_kv) - model.weights_gib - draft_gib
    bytes_per_token = model.kv_bytes_per_token * KV_SCALE[kv_dtype]
    if mamba_cache_all:
        bytes_per_token *= 1 + model.state_groups
    draft = f" - {draft_gib:g} GiB draft" if draft_gib else ""
    detail = (f"{tp} x ({gpu_gib:.2f} GiB x {util:g} - {non_kv:.2f} GiB non-KV) - {model.weights_gib:g} GiB "
              f"weights{draft} = {kv_gib:.2f} GiB of KV at {bytes_per_token:.0f} B/token ({kv_dtype})"
              f" = {int(max(kv_gib, 0) * GIB // bytes_per_token)} tokens")
    return Pool(kv_gib, bytes_per_token, model.request_state_gib, detail)


def model_limit(model: ModelSpec, yarn_on: bool, factor: float | None) -> int | None:
    if model.native_context is None:
        return None
    if yarn_on and factor:
        return int(model.native_context * factor)
    return model.native_context


def choose_context(model: ModelSpec, host: Host, tp: int, kv_dtype: str, util: float, draft_gib: float,
                   requested: int | None, yarn_on: bool, factor: float | None,
                   spec_method: str = "off", mamba_cache_all: bool = False) -> ContextChoice:
    limit = model_limit(model, yarn_on, factor)
    decisions = []
    if requested is not None:
        if limit is not None and requested > limit:
            hint = ("" if yarn_on or not model.yarn_factor
                    else f" (up to {int(model.native_context * model.yarn_factor)} with VL_YARN=on)")
            raise LaunchError(subject="VL_CTX", value=str(requested),
                              problem=f"VL_CTX={requested} is not valid for model {model.key}",
                              fix=f"accepted values are 1024 to {limit}{hint}; set a smaller VL_CTX.")
        ctx = requested
        decisions.append(Decision("context", f"max-model-len {ctx}", "VL_CTX"))
    elif model.weights_gib is None or model.kv_bytes_per_token is None:
        return ContextChoice(None, None, (Decision(
            "context", "vLLM's default", "model outside the catalogue: weight size and KV bytes per token "
            "unknown, vLLM derives the context from its config (set VL_CTX to choose)"),))
    else:
        pool = kv_pool(model, host.min_memory_mib, tp, kv_dtype, util, spec_method, draft_gib, mamba_cache_all)
        fitting = [tier for tier in CONTEXT_TIERS if (limit is None or tier <= limit) and pool.fits(tier)]
        basis = f"; {model.sizing_basis}" if model.sizing_basis else ""
        if fitting:
            ctx = fitting[0]
            why = (f"largest tier <= model limit {limit} whose request ({pool.need_gib(ctx):.2f} GiB) fits the pool"
                   f" with {FIT_MARGIN:.0%} to spare: {pool.detail}{basis}")
        else:
            ctx = min(CONTEXT_TIERS[-1], limit) if limit is not None else CONTEXT_TIERS[-1]
            why = (f"smallest tier; one request of it needs {pool.need_gib(ctx):.2f} GiB, more than the estimated "
                   f"pool, and vLLM may refuse to start (set VL_CTX lower or add GPUs): {pool.detail}{basis}")
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
