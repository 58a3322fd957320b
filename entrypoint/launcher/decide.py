"""From marker, knobs, catalogue and host to one plan: argv, environment changes, decisions."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from .bridgeplan import Bridge, behind_bridge, decide_bridge
from .caches import decide_caches
from .catalogue import ModelSpec, check_gpu_family
from .cmdline import ContainerArgs, Option, merge
from .compat import decide_compat
from .report import Decision, LaunchError
from .hfcache import check_repo, hub_cache_dir
from .knobs import Settings, check_numa_nodes, exposed_port, flag_of
from .loader import libcuda_for_linking
from .marker import Marker
from .modelinfos import decide_modelinfos
from .probe import Host
from .runner import ENV as RUNNER_ENV, decide_runner
from .startmethod import ENV as START_METHOD_ENV, decide_start_method
from .swap.sleepmode import DEV_MODE_ENV, Slot
from ..claudecode_wire import claude_names
from ..contract import Observe
from .observeplan import decide_observe
from .sizing import ContextChoice, choose_context
from .speculation import SpeculationChoice, decide_speculation
from .thinking import ENV as THINKING_ENV, decide_thinking, wants_budgets

if TYPE_CHECKING:
    from .compilecache import CompileCache

TURBOQUANT_UTIL, DSPARK_UTIL, DEFAULT_UTIL = 0.85, 0.90, 0.93


@dataclass(frozen=True)
class Plan:
    argv: tuple[str, ...]
    env_changes: Mapping[str, str | None]  # None: variable removed
    decisions: tuple[Decision, ...]
    links: Mapping[str, str] = field(default_factory=dict)  # path -> target, made just before exec
    bridge: Bridge | None = None  # who holds the exposed port
    observe: Observe | None = None  # the run folder, the status page's watchdog and journal (with the bridge)
    max_model_len: int | None = None  # the context vLLM gets, for /v1/models (None: vLLM's own, or not a number)
    compile_cache: "CompileCache | None" = None  # VL_CACHE_REPO: where vLLM's compile cache is restored from
    copies: Mapping[str, str] = field(default_factory=dict)  # target -> baked file, copied just before vLLM starts

    @property
    def model(self) -> str:
        """What vLLM serves: argv is `vllm serve MODEL [options...]` (build_plan writes it so)."""
        return self.argv[2]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        for name, value in self.env_changes.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def as_json(self) -> dict:
        plan = {"argv": list(self.argv), "env": dict(self.env_changes),
                "decisions": [d.as_json() for d in self.decisions]}
        plan["bridge"] = self.bridge.as_json() if self.bridge else None
        plan["observe"] = self.observe.as_json() if self.observe else None
        if self.links:
            plan["links"] = dict(self.links)
        if self.compile_cache:
            plan["compile_cache"] = self.compile_cache.as_json()
        if self.copies:
            plan["copies"] = dict(self.copies)
        return plan


def _parallelism(settings: Settings, host: Host) -> tuple[int, int, list[Decision]]:
    count = len(host.gpus)
    dp = settings.value("VL_DP")
    tp = settings.value("VL_TP") or count
    # Every GPU by default: a 2x A40 pod left at TP 1 wasted half its VRAM and bandwidth, silently.
    why = "VL_TP" if settings.is_set("VL_TP") else f"VL_TP unset: one shard per GPU ({count} GPU(s))"
    decisions = []
    if dp > 1:
        if tp != 1 and settings.is_set("VL_TP"):
            decisions.append(Decision("parallelism", f"VL_TP={tp} overridden to 1", f"VL_DP={dp} > 1 forces tensor parallel 1"))
        tp, why = 1, f"VL_DP={dp}: one full replica per GPU, no all-reduce between GPUs"
    if tp * dp > count:
        raise LaunchError(subject="VL_TP", value=str(tp),
                          problem=f"VL_TP={tp} x VL_DP={dp} = {tp * dp} GPUs, but this host has {count}",
                          fix=f"accepted values are VL_TP x VL_DP <= {count}.")
    decisions.insert(0, Decision("parallelism", f"tensor-parallel-size {tp}, data-parallel-size {dp}", why))
    return tp, dp, decisions


def _kv_and_attention(model: ModelSpec, settings: Settings, host: Host) -> tuple[str, str | None, list[Decision]]:
    raw = settings.value("VL_KV")
    kv = "auto" if (raw or model.kv_cache_dtype) == "bf16" else (raw or model.kv_cache_dtype)
    why = "VL_KV" if raw else f"model {model.key} default"
    if kv.startswith("fp8") and host.gpus[0].sm < (8, 9):
        why += "; on sm_8x vLLM serves a quantised KV with TRITON_ATTN (FA2 takes none)"
    decisions = [Decision("kv-cache-dtype", kv, why)]
    attention = settings.value("VL_ATTN")
    if attention and kv.startswith("turboquant"):
        decisions.append(Decision("attention-backend", f"VL_ATTN={attention} ignored",
                                  "TurboQuant KV brings its own attention path (FLASHINFER is incompatible)"))
        attention = None
    return kv, attention, decisions


def _utilisation(settings: Settings, kv: str, spec_method: str) -> tuple[float, Decision]:
    if settings.is_set("VL_UTIL"):
        return settings.value("VL_UTIL"), Decision("gpu-memory-utilization", str(settings.value("VL_UTIL")), "VL_UTIL")
    if kv.startswith("turboquant"):
        # TurboQuant dequantises K to dense bf16 per prefill chunk: at ~700 k tokens 0.93 lacked
        # 516 MiB (OOM). 0.85 leaves ~3.5 GiB per GPU for ~12 % less KV.
        return TURBOQUANT_UTIL, Decision("gpu-memory-utilization", str(TURBOQUANT_UTIL), f"TurboQuant KV ({kv})")
    if spec_method == "dspark":
        # 0.93 with DSpark left 220 MiB free at CUDA graph capture.
        return DSPARK_UTIL, Decision("gpu-memory-utilization", str(DSPARK_UTIL), "DSpark draft model")
    return DEFAULT_UTIL, Decision("gpu-memory-utilization", str(DEFAULT_UTIL), "bf16/fp8 KV")


def yarn_factor(model: ModelSpec, settings: Settings) -> tuple[float | None, list[Decision]]:
    """VL_YARN_FACTOR only for a model whose catalogue entry has YaRN (the script read it for one model)."""
    if not settings.is_set("VL_YARN_FACTOR"):
        return model.yarn_factor, []
    raw = settings.by_name["VL_YARN_FACTOR"].raw
    if model.yarn_factor is None:
        return None, [Decision("yarn", f"VL_YARN_FACTOR={raw} ignored",
                               f"model {model.key} has no YaRN in the catalogue: a rope override would change "
                               "a model its publisher never extended")]
    factor = settings.value("VL_YARN_FACTOR")
    if not settings.value("VL_YARN"):
        return factor, [Decision("yarn-factor", f"VL_YARN_FACTOR={raw} unused",
                                 f"VL_YARN=off: model {model.key} stays within its native {model.native_context}")]
    return factor, [Decision("yarn-factor", f"{factor:g} instead of the catalogue's {model.yarn_factor:g}",
                             f"VL_YARN_FACTOR={raw}: model limit {int(model.native_context * factor)} instead of "
                             f"{int(model.native_context * model.yarn_factor)}")]


def _model_flags(model: ModelSpec, settings: Settings, host: Host) -> list[Option]:
    if model.key == "nemotron" or any(flag.knob and flag.knob.startswith("VL_MAMBA") for flag in model.flags):
        backend, stochastic = settings.value("VL_MAMBA_BACKEND"), settings.value("VL_STOCHASTIC")
        if settings.value("VL_REPLAYSSM") and backend != "triton":
            raise LaunchError(subject="VL_REPLAYSSM", value="on",
                              problem=f"VL_REPLAYSSM=on needs VL_MAMBA_BACKEND=triton (is {backend})",
                              fix="accepted combinations are VL_REPLAYSSM=on with VL_MAMBA_BACKEND=triton, or "
                                  "VL_REPLAYSSM=off.")
        if stochastic and backend == "triton" and min(gpu.sm for gpu in host.gpus) < (10, 0):
            raise LaunchError(subject="VL_STOCHASTIC", value="on",
                              problem="VL_STOCHASTIC=on with VL_MAMBA_BACKEND=triton emits PTX `.rs`, which only "
                                      "Blackwell (sm_100+) has (\"ptxas: Feature '.rs' not supported on .target "
                                      "'sm_89'\")",
                              fix="use VL_MAMBA_BACKEND=flashinfer, or VL_STOCHASTIC=off (then "
                                  "VL_MAMBA_DTYPE=float32).")
    options = []
    for flag in model.flags:
        if flag.knob is None:
            options.append(Option(flag.flag, (flag.value,) if flag.value is not None else ()))
            continue
        value = settings.value(flag.knob)
        if flag.switch:
            if value:
                options.append(Option(flag.flag, (flag.value,) if flag.value is not None else ()))
        elif value is not None:
            options.append(Option(flag.flag, (str(value),)))
    return options


def _offline(model: ModelSpec, settings: Settings, env: Mapping[str, str], draft: str | None) -> tuple[dict, Decision]:
    mode = settings.value("VL_HFOFFLINE")
    current = env.get("HF_HUB_OFFLINE")
    if mode == "on":
        return {"HF_HUB_OFFLINE": "1"}, Decision("hf-offline", "on", "VL_HFOFFLINE=on")
    # A previous offline setting must not survive: a model not yet downloaded would then fail
    # with "Invalid repository ID" (bootstrap v56/v57).
    go_online = {"HF_HUB_OFFLINE": None} if current is not None else {}
    if mode == "off":
        return go_online, Decision("hf-offline", "off", "VL_HFOFFLINE=off")
    cache_dir = hub_cache_dir(env)
    checks = [check_repo(model.repo, cache_dir)]
    if model.tokenizer:
        checks.append(check_repo(model.tokenizer, cache_dir, weights=False))
    if draft:  # the draft must be cached BEFORE going offline (v56: "Invalid repository ID")
        checks.append(check_repo(draft, cache_dir))
    detail = "; ".join(f"{c.repo}: {c.detail}" for c in checks)
    if all(c.complete for c in checks):
        return {"HF_HUB_OFFLINE": "1"}, Decision("hf-offline", "on", f"weights cached in {cache_dir} ({detail}): no Hub call at start")
    return go_online, Decision("hf-offline", "off", f"{cache_dir}: {detail}")


@dataclass
class _Draft:
    """What build_plan's steps add to, in the order they run: the decisions as they are taken, the environment's
    changes (None: removed) and the links to make before vLLM starts."""
    decisions: list[Decision]
    env: dict[str, str | None] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    copies: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Engine:
    """How vLLM's engine is sized on this host: parallelism, KV cache, speculation, memory share, context."""
    tp: int
    dp: int
    kv: str
    attention: str | None
    spec: SpeculationChoice
    util: float
    context: ContextChoice
    async_on: bool


def build_plan(marker: Marker, settings: Settings, model: ModelSpec, host: Host,
               env: Mapping[str, str], args: ContainerArgs, slot: Slot | None = None) -> Plan:
    """slot: the model's place in a swap set whose models sleep (swap/sleepmode.py): its own port, a share of the GPU."""
    user_keys = frozenset(args.keys)  # first: refuses a container argument the launcher cannot pass on
    draft = _Draft([Decision("model", f"{model.key} ({model.repo})",
                             f"VL_MODEL from {settings.source('VL_MODEL')}; {model.notes}")])
    check_gpu_family(model, [(gpu.name, gpu.compute_cap, gpu.sm) for gpu in host.gpus])
    _host_libraries(draft, marker, host, env)
    engine = _size_engine(draft, model, settings, host, args, user_keys, slot)
    served, bridge, args = _front_door(draft, model, settings, args, slot)
    options = [*_serving_options(draft, served, bridge, engine, settings, host, slot),
               *_model_options(draft, model, settings, host, engine, user_keys, env)]
    tail = _with_container_arguments(draft, options, args, user_keys, engine, settings)
    _thinking(draft, model, settings, engine, args, user_keys, env)
    _start_environment(draft, model, settings, engine, env)
    _start_method(draft, settings, user_keys, env)
    observe, observe_decisions = decide_observe(settings, env, bridge.mode)
    draft.decisions += observe_decisions
    for name, why in settings.ignored:
        draft.decisions.append(Decision("ignored", name, why))

    changes = {k: v for k, v in draft.env.items() if v is None or env.get(k) != v}
    # The context vLLM gets: a container argument's, when one sets it (as a number: vLLM also reads "32k")
    max_model_len = args.max_model_len if args.last("max-model-len") is not None else engine.context.max_model_len
    return Plan(("vllm", "serve", model.repo, *tail), changes, tuple(draft.decisions), draft.links, bridge,
                observe=observe, max_model_len=max_model_len, copies=draft.copies)


def _host_libraries(draft: _Draft, marker: Marker, host: Host, env: Mapping[str, str]) -> None:
    """Which libcuda vLLM loads (CUDA forward compatibility), what -lcuda links against, the variant's GPUs."""
    compat = decide_compat(host, marker, env)
    draft.decisions += [compat.decision, *compat.loader]
    draft.env.update(compat.env)
    if compat.ld_library_path is not None:
        draft.env["LD_LIBRARY_PATH"] = compat.ld_library_path
    libcuda_links, linker_env, linker_decision = libcuda_for_linking(compat.libcuda, env)
    draft.env.update(linker_env)
    draft.decisions.append(linker_decision)
    if marker.cuda_arch and any(gpu.compute_cap != marker.cuda_arch for gpu in host.gpus):
        caps = ", ".join(sorted({gpu.compute_cap for gpu in host.gpus}))
        draft.decisions.append(Decision(
            "variant", f"warning: {marker.variant} image targets sm {marker.cuda_arch}, GPUs are {caps}",
            "kernels compiled at run time for this variant may be slower or missing; prefer the image variant of "
            "this host family"))
    draft.links.update({os.path.join(compat.links_dir, name): target for name, target in compat.links.items()})
    draft.links.update(libcuda_links)


def _size_engine(draft: _Draft, model: ModelSpec, settings: Settings, host: Host, args: ContainerArgs,
                 user_keys: frozenset[str], slot: Slot | None) -> _Engine:
    tp, dp, parallel_decisions = _parallelism(settings, host)
    draft.decisions += parallel_decisions
    kv, attention, kv_decisions = _kv_and_attention(model, settings, host)
    draft.decisions += kv_decisions
    spec = decide_speculation(model, settings, host, kv)
    draft.decisions.append(spec.decision)
    util, util_decision = _utilisation(settings, kv, spec.method)
    if slot is not None and slot.util_cap < util:
        util_decision = Decision("gpu-memory-utilization", f"{slot.util_cap:g} instead of {util:g}",
                                 f"{util_decision.why}; the other models of the swap set sleep on the same GPU")
        util = slot.util_cap
    draft.decisions.append(util_decision)

    factor, factor_decisions = yarn_factor(model, settings)
    draft.decisions += factor_decisions
    mamba_all = "all" in args.values("mamba-cache-mode")
    context = choose_context(model, host, tp, kv, util, spec.draft_gib, settings.value("VL_CTX"),
                             settings.value("VL_YARN"), factor, spec.method, mamba_all)
    draft.decisions += context.decisions

    # Async scheduling overlaps CPU scheduling with GPU work; vLLM turns it off as soon as any
    # speculation is configured, even one scheduled down to zero tokens.
    async_on = settings.value("VL_ASYNC") and spec.method == "off" and args.speculative_config is None
    draft.decisions.append(Decision("async-scheduling", "on" if async_on else "off",
                                    "VL_ASYNC=off" if not settings.value("VL_ASYNC") else
                                    "no speculation configured" if async_on else "speculation configured"))
    return _Engine(tp, dp, kv, attention, spec, util, context, async_on)


def _front_door(draft: _Draft, model: ModelSpec, settings: Settings, args: ContainerArgs,
                slot: Slot | None) -> tuple[list[str], Bridge, ContainerArgs]:
    """What clients reach: the exposed port, the names vLLM answers to, who holds the port (the bridge or vLLM), and
    the container's arguments as vLLM gets them behind the bridge."""
    port, port_why = exposed_port(settings)
    draft.decisions.append(Decision("port", str(port), port_why))
    name = model.served_name
    aliases = settings.value("VL_ALIASES") or ()
    # The [1m] suffix makes Claude Code assume a 1M window; without it an unknown name gets
    # ~200 k and auto-compaction fires early ("Prompt is too long").
    served = list(dict.fromkeys([name, *claude_names(name), *aliases]))
    draft.decisions.append(Decision("served-model-name", " ".join(served),
                                    "<name>, claude-<name>, claude-<name>[1m], then VL_ALIASES"))
    bridge, bridge_decision = decide_bridge(settings, args, port, port_why, slot.index if slot else 0)
    draft.decisions.append(bridge_decision)
    args, host_decision = behind_bridge(bridge, args)
    if host_decision:
        draft.decisions.append(host_decision)
    return served, bridge, args


def _serving_options(draft: _Draft, served: list[str], bridge: Bridge, engine: _Engine, settings: Settings,
                     host: Host, slot: Slot | None) -> list[Option]:
    """vLLM's names, address, parallelism and scheduler: what does not depend on the model."""
    options = [
        Option(flag_of("VL_ALIASES"), tuple(served)),
        Option("--host", (bridge.vllm_host,)),
        Option(flag_of("VL_INTERNAL_PORT"), (str(bridge.vllm_port),)),
        Option(flag_of("VL_TP"), (str(engine.tp),)),
        Option(flag_of("VL_DP"), (str(engine.dp),)),
        # The other P2P path besides NCCL's: vLLM's own all-reduce spun on an A40 pair without P2P.
        Option("--disable-custom-all-reduce"),
    ]
    if bridge.mode == "keepalive":
        # The bridge polls /health every second and /metrics every 5 s (docs/status.md): without this, one
        # access-log line each in vLLM's log, and the log tail shows nothing else.
        options.append(Option("--disable-access-log-for-endpoints", ("/health,/metrics",)))
    if slot is not None:
        options.append(Option("--enable-sleep-mode"))
        draft.env[DEV_MODE_ENV] = "1"  # /sleep and /wake_up; the bridge never relays them (serving/auth.py)
    if settings.value("VL_NOVIDEO"):
        options.append(Option(flag_of("VL_NOVIDEO"), ('{"video":0}',)))  # -36 s of API server start
    options.append(Option("--enable-prompt-tokens-details"))
    if settings.is_set("VL_OPT"):
        options.append(Option(flag_of("VL_OPT"), (settings.value("VL_OPT"),)))
    check_numa_nodes(settings, engine.tp * engine.dp, len(host.gpus))
    if settings.value("VL_NUMA"):
        options += [Option(flag_of("VL_NUMA")),
                    Option(flag_of("VL_NUMA_NODES"), tuple(map(str, settings.value("VL_NUMA_NODES"))))]
    if settings.value("VL_EP") and engine.tp > 1:
        options.append(Option(flag_of("VL_EP")))
    options += [Option(flag_of("VL_UTIL"), (str(engine.util),)),
                Option(flag_of("VL_BATCHED"), (str(settings.value("VL_BATCHED")),))]
    if settings.is_set("VL_LONGPREFILL"):
        options.append(Option(flag_of("VL_LONGPREFILL"), (str(settings.value("VL_LONGPREFILL")),)))
    options.append(Option(flag_of("VL_SEQS"), (str(settings.value("VL_SEQS")),)))
    if engine.attention:
        options.append(Option(flag_of("VL_ATTN"), (engine.attention,)))
    if settings.is_set("VL_OFFLOAD"):
        options.append(Option(flag_of("VL_OFFLOAD"), (f"{settings.value('VL_OFFLOAD'):g}",)))
    options.append(Option("--enable-prefix-caching"))
    if engine.async_on:
        options.append(Option(flag_of("VL_ASYNC")))
    return options


def _model_options(draft: _Draft, model: ModelSpec, settings: Settings, host: Host, engine: _Engine,
                   user_keys: frozenset[str], env: Mapping[str, str]) -> list[Option]:
    """The model's parsers, tokenizer, context (YaRN), KV cache dtype, catalogue flags and speculation."""
    options = []
    tool_parser = model.tool_call_parser
    if tool_parser or "tool-call-parser" in user_keys:
        options.append(Option("--enable-auto-tool-choice"))  # vLLM refuses it without a parser
    if tool_parser:
        options.append(Option("--tool-call-parser", (tool_parser,)))
    if model.reasoning_parser:
        options.append(Option("--reasoning-parser", (model.reasoning_parser,)))
    if model.trust_remote_code:
        options.append(Option("--trust-remote-code"))
    if model.tokenizer:
        options.append(Option("--tokenizer", (model.tokenizer,)))
    context = engine.context
    if context.yarn_factor is not None:
        yarn = {"rope_type": "yarn", "factor": context.yarn_factor,
                "original_max_position_embeddings": model.native_context}
        # A multimodal checkpoint (Qwen3.5's *ForConditionalGeneration) keeps its language model's RoPE in
        # text_config: rope_scaling set at the top fails in vLLM 0.27.1 ("'Qwen3_5MoeConfig' object has no attribute
        # 'max_position_embeddings'"); merged into text_config.rope_parameters it keeps the model's mrope sections.
        multimodal = (model.architecture or "").endswith("ForConditionalGeneration")
        rope = {"text_config": {"rope_parameters": yarn}} if multimodal else {"rope_scaling": yarn}
        options.append(Option("--hf-overrides", (json.dumps(rope, separators=(",", ":")),)))
        draft.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
    elif env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") is not None:
        draft.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = None  # the switch without YaRN: NaN beyond native
        draft.decisions.append(Decision("yarn", "VLLM_ALLOW_LONG_MAX_MODEL_LEN removed",
                                        "the long-context switch without rope_scaling lets RoPE produce NaN beyond "
                                        "the native length"))
    if context.max_model_len is not None:
        options.append(Option(flag_of("VL_CTX"), (str(context.max_model_len),)))
    if engine.kv != "auto":
        options.append(Option(flag_of("VL_KV"), (engine.kv,)))
    options += _model_flags(model, settings, host)
    if engine.spec.config:
        options.append(Option("--speculative-config", (engine.spec.config,)))
    return options


def _with_container_arguments(draft: _Draft, options: list[Option], args: ContainerArgs, user_keys: frozenset[str],
                              engine: _Engine, settings: Settings) -> list[str]:
    """vLLM's arguments after `serve MODEL`: the launcher's options, those the container's arguments repeat dropped,
    then the container's arguments."""
    tail, overridden = merge(options, args)
    if overridden:
        draft.decisions.append(Decision("container-arguments", "override " + " ".join("--" + k for k in overridden),
                                        "arguments given to the container win over the launcher's value"))
    if args.speculative_config is not None and engine.spec.method == "off" and settings.value("VL_ASYNC"):
        draft.decisions.append(Decision("async-scheduling", "off", "container arguments configure speculation"))
    return tail


def _thinking(draft: _Draft, model: ModelSpec, settings: Settings, engine: _Engine, args: ContainerArgs,
              user_keys: frozenset[str], env: Mapping[str, str]) -> None:
    """The thinking-controls plugin's policy, and which runner vLLM uses where thinking budgets need one."""
    user_spec = [args.speculative_config] if args.speculative_config is not None else []
    dspark = engine.spec.method == "dspark" or any("dspark" in value for value in user_spec)
    user_parser = "reasoning-parser" in user_keys
    budgets_wanted = wants_budgets(model, settings, user_parser)
    runner = decide_runner(budgets_wanted, engine.spec.method, user_spec,
                           args.values("prefill-context-parallel-size"),
                           env)
    thinking, thinking_decision = decide_thinking(model, settings, dspark, user_parser,
                                                  None if runner.budgets else runner.decision.why)
    draft.decisions.append(thinking_decision)
    if budgets_wanted:  # which runner vLLM uses matters only where thinking budgets would be set
        draft.decisions.append(runner.decision)
        if runner.env is not None:
            draft.env[RUNNER_ENV] = runner.env
    if thinking is not None or env.get(THINKING_ENV) is not None:
        draft.env[THINKING_ENV] = thinking  # None removes a stray value: the plugin stays off


def _start_method(draft: _Draft, settings: Settings, user_keys: frozenset[str], env: Mapping[str, str]) -> None:
    """fork or spawn for vLLM's engine core and workers (startmethod.py)."""
    numa_bind = bool(settings.value("VL_NUMA")) or "numa-bind" in user_keys
    value, decision = decide_start_method(env, numa_bind)
    draft.decisions.append(decision)
    if value is not None:
        draft.env[START_METHOD_ENV] = value


def _start_environment(draft: _Draft, model: ModelSpec, settings: Settings, engine: _Engine,
                       env: Mapping[str, str]) -> None:
    """The caches on the volume, the Hub online or not, and the switches vLLM reads from its environment."""
    cache_env, cache_decisions = decide_caches(settings.value("VL_CACHE_ROOT"), env)
    draft.env.update(cache_env)
    draft.decisions += cache_decisions
    draft.copies, modelinfo_decision = decide_modelinfos({**env, **cache_env})
    draft.decisions.append(modelinfo_decision)
    offline_env, offline_decision = _offline(model, settings, {**env, **cache_env}, engine.spec.draft_repo)
    draft.env.update(offline_env)
    draft.decisions.append(offline_decision)
    draft.env["VLLM_USE_FASTOKENS"] = "1" if settings.value("VL_FASTOK") else "0"
    # Flashinfer's sampler compiles at run time; with it on, a 580/CUDA 13.0 pod died on
    # "CUDA error: unspecified launch failure" at the first generation (21/08).
    draft.env["VLLM_USE_FLASHINFER_SAMPLER"] = "1" if settings.value("VL_FLASHINFER") else "0"
    draft.decisions.append(Decision("flashinfer-sampler", "on" if settings.value("VL_FLASHINFER") else "off",
                                    f"VL_FLASHINFER from {settings.source('VL_FLASHINFER')}"))
    if "HF_XET_HIGH_PERFORMANCE" not in env:
        draft.env["HF_XET_HIGH_PERFORMANCE"] = "1"  # faster first download of the weights
    if "HF_HUB_DISABLE_PROGRESS_BARS" not in env:
        draft.env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # a first download filled the pod's log (script line 225)
