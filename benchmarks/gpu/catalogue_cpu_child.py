"""In the built image (catalogue_cpu.py starts it, with the stub libcuda.so.1 on LD_LIBRARY_PATH): each job's
launcher argv, its model repo replaced by a scaled config folder, through vLLM 0.27.1's own `vllm serve` parser,
EngineArgs and create_engine_config() on a CUDA platform that says what GPU the job's host has; then the
architecture's class from vLLM's registry and the quantization schemes vLLM would pick on that GPU.

Usage: python catalogue_cpu_child.py JOBS.json RESULT.json. Each job: {"key", "argv", "env", "model_dir",
"tokenizer_dir" or null, "capability": [major, minor], "gpu", "memory_mib"}. One line per job on stdout.
"""
import json
import os
import sys
import time
import traceback

started = time.time()
with open(sys.argv[1]) as f:
    jobs = json.load(f)

import vllm.platforms as platforms  # noqa: E402
from vllm.platforms.cuda import CudaPlatform  # noqa: E402  (needs libcuda.so.1: the stub)
from vllm.platforms.interface import DeviceCapability  # noqa: E402

START_ENV = {name: value for name, value in os.environ.items() if name.startswith("VLLM_")}
HOST = {"capability": (9, 0), "name": "NVIDIA H200", "memory_mib": 143771}


class HostPlatform(CudaPlatform):
    """vLLM's CUDA platform, with the job's GPU answered instead of asked of NVML (no GPU here)."""

    @classmethod
    def get_device_capability(cls, device_id=0):
        return DeviceCapability(*HOST["capability"])

    @classmethod
    def get_device_name(cls, device_id=0):
        return HOST["name"]

    @classmethod
    def get_device_total_memory(cls, device_id=0):
        return HOST["memory_mib"] << 20

    @classmethod
    def is_fully_connected(cls, physical_device_ids):
        return True


platforms.current_platform = HostPlatform()

from entrypoint.launcher.modelinfos import copy_modelinfos, decide_modelinfos  # noqa: E402  (/repo's)
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402

BAKED_MODELINFOS = "/opt/prebake/modelinfos"  # the image's, baked at build time
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

top = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand()
serve.subparser_init(top.add_subparsers(required=False, dest="subparser"))


def served_argv(job):
    """The launcher's argv with the repo id replaced by the scaled folder, dummy weights, the tokenizer folder."""
    argv = list(job["argv"][1:])  # without "vllm"
    argv[1] = job["model_dir"]
    if "--tokenizer" in argv and job.get("tokenizer_dir"):
        argv[argv.index("--tokenizer") + 1] = job["tokenizer_dir"]
    return [*argv, "--load-format", "dummy"]


def quant_schemes(vllm_config):
    """What vLLM's quantization config would build on this GPU: {target: scheme or kernel (min capability)}."""
    from vllm.config import set_current_vllm_config

    model_config = vllm_config.model_config
    method = model_config.quantization
    if not method:
        return None, {}
    quant_config = vllm_config.quant_config
    found = {"method": method, "class": type(quant_config).__name__,
             "min_capability": quant_config.get_min_capability()}
    schemes = {}
    with set_current_vllm_config(vllm_config):
        for target, parts in getattr(quant_config, "target_scheme_map", {}).items():
            try:
                scheme = quant_config._get_scheme_from_parts(
                    weight_quant=parts.get("weights"), input_quant=parts.get("input_activations"),
                    format=parts.get("format"), layer_name=target)
                kernel = getattr(scheme, "kernel", None)
                schemes[target] = "%s (min sm_%d%s)" % (
                    type(scheme).__name__, scheme.get_min_capability(),
                    ", kernel " + type(kernel).__name__ if kernel is not None else "")
            except Exception as err:
                schemes[target] = "refused: %s: %s" % (type(err).__name__, str(err)[:200])
        if not schemes and method in ("modelopt_fp4", "modelopt"):
            try:
                from vllm.model_executor.kernels.linear import init_nvfp4_linear_kernel
                schemes["Linear"] = "kernel " + type(init_nvfp4_linear_kernel()).__name__
            except Exception as err:
                schemes["Linear"] = "refused: %s: %s" % (type(err).__name__, str(err)[:200])
    return found, schemes


def validate(job):
    HOST.update(capability=tuple(job["capability"]), name=job["gpu"], memory_mib=job["memory_mib"])
    for name in [n for n in os.environ if n.startswith("VLLM_") and n not in START_ENV]:
        del os.environ[name]  # no job sees another's variables (VLLM_ALLOW_LONG_MAX_MODEL_LEN would hide a refusal)
    os.environ.update(START_ENV)
    os.environ.update({name: value for name, value in job["env"].items() if name.startswith("VLLM_")})
    # as a pod's launcher does before vLLM starts: the image's baked model infos where vLLM's registry reads them
    # (without them each architecture is inspected in a subprocess that imports vLLM again: 7-27 s a job)
    copies, _ = decide_modelinfos(os.environ, folder=BAKED_MODELINFOS)
    unable = copy_modelinfos(copies)
    if unable:
        print("[catalogue-cpu] " + unable, flush=True)
    args = top.parse_args(served_argv(job))
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    serve.validate(args)
    engine_args = AsyncEngineArgs.from_cli_args(args)
    config = engine_args.create_engine_config()
    model = config.model_config
    from vllm.model_executor.models.registry import ModelRegistry

    model_class, architecture = ModelRegistry.resolve_model_cls(model.architectures, model_config=model)
    text = model.hf_text_config
    rope = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None) or {}
    quant, schemes = quant_schemes(config)
    processor = None
    if model.is_multimodal_model:  # the profile at start feeds the vision tower a dummy image through this
        from vllm.multimodal import MULTIMODAL_REGISTRY

        limits = {m: 1 for m in ("image", "video") if model.multimodal_config.get_limit_per_prompt(m) > 0}
        MULTIMODAL_REGISTRY.get_dummy_mm_inputs(model, limits)
        processor = "%s, a dummy %s processed" % (type(MULTIMODAL_REGISTRY.create_processor(model)).__name__,
                                                   " and ".join(sorted(limits)))
    spec = config.speculative_config
    return {
        "architecture": architecture, "model_class": model_class.__name__,
        "is_hybrid": bool(getattr(model_class, "is_hybrid", False)),
        "max_model_len": model.max_model_len, "rope": {k: rope.get(k) for k in ("rope_type", "factor",
                                                                               "original_max_position_embeddings")},
        "kv_cache_dtype": config.cache_config.cache_dtype,
        "mamba_cache_mode": getattr(config.cache_config, "mamba_cache_mode", None),
        "mamba_ssm_cache_dtype": getattr(config.cache_config, "mamba_ssm_cache_dtype", None),
        "speculative": None if spec is None else {"method": spec.method, "tokens": spec.num_speculative_tokens,
                                                  "draft": spec.draft_model_config.architectures
                                                  if spec.draft_model_config else None},
        "quantization": quant, "schemes": schemes, "processor": processor,
        "parsers": [args.tool_call_parser, args.reasoning_parser],
        "async_scheduling": config.scheduler_config.async_scheduling,
        "prefix_caching": config.cache_config.enable_prefix_caching,
    }


results = []
for job in jobs:
    began = time.time()
    try:
        found = validate(job)
        error = None
    except BaseException as err:  # vLLM's refusal (ValueError, pydantic's ValidationError, SystemExit) is the finding
        found, error = {}, "%s: %s" % (type(err).__name__, str(err).strip().splitlines()[-1][:500] if str(err) else "")
        found["traceback"] = traceback.format_exc()[-1500:]
    results.append({"key": job["key"], "gpu": job["gpu"], "error": error, "seconds": round(time.time() - began, 1),
                    **found})
    print("[catalogue-cpu] %s %s on %s: %s" % (
        "ok  " if error is None else "FAIL", job["key"], job["gpu"],
        error or "%s, max_model_len %s, rope %s, kv %s, mamba %s/%s, spec %s, quant %s %s" % (
            found["architecture"], found["max_model_len"], found["rope"].get("factor"), found["kv_cache_dtype"],
            found["mamba_cache_mode"], found["mamba_ssm_cache_dtype"], found["speculative"],
            (found["quantization"] or {}).get("class"), json.dumps(found["schemes"]))
        + (", processor %s" % found["processor"] if found.get("processor") else "")), flush=True)

with open(sys.argv[2], "w") as f:
    json.dump({"seconds": round(time.time() - started, 1), "results": results}, f, indent=1)
