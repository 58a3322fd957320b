"""Speculative decoding per model (bootstrap lines 575-590 and 867-973)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .catalogue import ModelSpec
from .report import Decision, LaunchError
from .knobs import Settings
from .probe import Host

# Draft weights that compete with the KV cache for VRAM (DFlash2 measured 3.8 GB; the
# DSpark speculator is a small Qwen3 drafter, estimated).
DRAFT_GIB = {"dspark": 1.5, "dflash": 3.6}


@dataclass(frozen=True)
class SpeculationChoice:
    method: str  # "off" | "ngram" | "mtp" | "dspark" | "dflash"
    config: str | None  # --speculative-config JSON
    draft_repo: str | None  # a second repository vLLM will load (must be cached before going offline)
    draft_gib: float
    decision: Decision


def decide_speculation(model: ModelSpec, settings: Settings, host: Host, kv_dtype: str) -> SpeculationChoice:
    raw = settings.value("VL_SPEC")
    chosen = "ngram" if raw == "on" else raw
    if chosen is None:
        method, why = model.speculation, f"model {model.key} default"
    else:
        method, why = chosen, f"VL_SPEC={settings.by_name['VL_SPEC'].raw}"
    if method not in model.speculation_allowed:
        raw_spec = settings.by_name['VL_SPEC'].raw
        raise LaunchError(
            subject="VL_SPEC", value=raw_spec, problem=f"VL_SPEC={raw_spec!r} is not valid for model {model.key}",
            fix=f"accepted values for this model are {'|'.join(model.speculation_allowed)}"
                + (" (speculation corrupts code on Kimi-Linear)" if model.key == "kimi" else "") + ".")

    if method == "off":
        return SpeculationChoice("off", None, None, 0.0, Decision("speculation", "off", why))

    if method == "dspark" and kv_dtype.startswith("turboquant") and host.gpus[0].sm < (9, 0):
        # Measured 22/08 on 2x A40: init failed with "No valid attention backend".
        raise LaunchError(
            subject="VL_KV", value=kv_dtype,
            problem=f"VL_SPEC=dspark with VL_KV={kv_dtype} does not start on "
                    f"sm_{host.gpus[0].compute_cap.replace('.', '')} (\"No valid attention backend\")",
            fix="accepted combinations are dspark with a bf16/fp8 KV, or TurboQuant KV without dspark.")

    draft = None
    if method == "mtp":
        n = settings.value("VL_MTP_N") or model.mtp_tokens
        config = {"method": "mtp", "num_speculative_tokens": n}
        summary = f"mtp, {n} tokens"
    elif method == "ngram":
        n, look_max, look_min = (settings.value(k) for k in ("VL_SPEC_N", "VL_LOOK_MAX", "VL_LOOK_MIN"))
        config = {"method": "ngram", "num_speculative_tokens": n}
        summary = f"ngram, {n} tokens, lookup {look_min}..{look_max}"
        if model.ngram_schedule:
            # Depth chosen per scheduling step by batch size: the verification cost is paid on
            # every sequence, free when the GPU is idle, a tax when it is full.
            config["num_speculative_tokens_per_batch_size"] = [[1, 1, n], *map(list, model.ngram_schedule)]
            summary += ", adaptive per batch size"
        config["prompt_lookup_max"] = look_max
        config["prompt_lookup_min"] = look_min
    elif method == "dspark":
        # vLLM 0.27.1 runs DSpark only in Model Runner V2, which rejects thinking_token_budget
        # (400 to Claude Code as soon as it sends an effort level).
        draft, n = settings.value("VL_DSPARK_MODEL"), settings.value("VL_DSPARK_N")
        config = {"method": "dspark", "model": draft, "num_speculative_tokens": n}
        summary = f"dspark {draft}, {n} tokens (effort levels unsupported under Model Runner V2)"
    else:  # dflash
        draft, n = settings.value("VL_DFLASH2_MODEL"), settings.value("VL_DFLASH2_N")
        config = {"method": "dflash", "model": draft, "num_speculative_tokens": n}
        summary = f"dflash {draft}, {n} tokens"
    return SpeculationChoice(method, json.dumps(config, separators=(",", ":")), draft, DRAFT_GIB.get(method, 0.0),
                             Decision("speculation", summary, why))
