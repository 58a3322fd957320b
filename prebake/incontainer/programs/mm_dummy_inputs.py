"""vLLM's multimodal dummy inputs, built as its engine builds them to profile memory at start, for every multimodal
catalogue model; no GPU.

    python mm_dummy_inputs.py JOBS.json      (a child of the zygote: the stub libcuda.so.1 on LD_LIBRARY_PATH)

JOBS.json: {"entrypoint": DIR, "host": {"name", "capability": [major, minor]}, "models": [{"key",
"architecture", "argv" (the launcher's `vllm serve` argv on that host, or null), "env" (its VLLM_* variables),
"refusal" (why no argv), "files" ({name: text}: a model folder for it, or null)}]}.

First vLLM's registry says which architectures take images (its model infos, baked by the build, copied where vLLM
reads them as a pod's launcher does; a class the build did not bake is inspected in a fork: registry_fork.py). For
each multimodal model: its folder is written, its argv (the repo replaced by the folder, dummy weights) goes through
vLLM's `vllm serve` parser and `create_engine_config()` on vLLM's own CUDA platform answering with the host GPU's
compute capability, then the GPU model runner's `MultiModalBudget` (which makes the processor-only cache the engine's
encoder budget uses) and `MULTIMODAL_REGISTRY.get_dummy_mm_inputs(model_config, {modality: 1}, cache=budget.cache)`,
as `_get_mm_dummy_batch` does in `profile_run`. With that cache, vLLM calls the HF processor on the placeholder text alone
(`_apply_hf_processor_text_only`): transformers 5.23.0 and later refuse it ("Found 1 <|image_pad|> tokens in the
text but no images were passed"), and every pod's start died there (issue 55). Then a request's image
(request_image): a PNG decoded by vLLM's ImageMediaIO, processed twice with the API server's cache, the second time
from it.

A model the launcher refuses on the host is reported with "skipped" (no pod of that GPU starts it).
Prints one JSON object on its last line: {"ok": bool, "results": [{"key", "ok", "detail", "seconds"}],
"text_only": [keys], "transformers": version}; exit status 1 when a model fails.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback

from entrypoint_door import image_module
from registry_fork import inspect_in_a_fork


def copy_model_infos(entrypoint_dir: str) -> str:
    """The build's baked model infos where vLLM's registry reads them (VLLM_CACHE_ROOT, a fresh folder), through
    the image's launcher module, as a pod's start does. Returns what it did, for the report."""
    os.environ["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix="prebake-mm-cache-")
    infos = image_module(entrypoint_dir, "launcher.modelinfos")
    copies, decision = infos.decide_modelinfos(dict(os.environ))
    failure = infos.copy_modelinfos(copies)
    return failure or decision.decision


def host_platform(host: dict):
    """vLLM's CUDA platform, answering for the host's GPU where vLLM's config asks (its compute capability picks
    kernels and backends); NVML has no GPU to ask in a build. Set before anything imports vllm.engine.arg_utils,
    which binds the platform at import."""
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatform  # needs libcuda.so.1: the stub
    from vllm.platforms.interface import DeviceCapability

    class HostPlatform(CudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id=0):
            return DeviceCapability(*host["capability"])

    platforms.current_platform = HostPlatform()
    from vllm.model_executor.models import registry

    # what the build did not bake (a speculative method's draft class: dense's Qwen3_5MTP) is inspected in a fork
    registry._run_in_subprocess = inspect_in_a_fork


def multimodal(architecture: str) -> bool | None:
    """vLLM's registry on the architecture: takes multimodal inputs or not; None when vLLM does not know it."""
    from vllm.model_executor.models.registry import ModelRegistry

    info = ModelRegistry._try_inspect_model_cls(architecture)
    return None if info is None else bool(info.supports_multimodal)


def serve_parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    ServeSubcommand().subparser_init(top.add_subparsers(required=False, dest="subparser"))
    return top


def engine_config(parser, model: dict, folder: str, start_env: dict):
    """The launcher's argv with its repo replaced by the folder and dummy weights, as vLLM reads it at start."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    for name in [n for n in os.environ if n.startswith("VLLM_") and n not in start_env]:
        del os.environ[name]  # no model sees another's variables (VLLM_ALLOW_LONG_MAX_MODEL_LEN among them)
    os.environ.update(start_env)
    os.environ.update({k: v for k, v in (model.get("env") or {}).items() if k.startswith("VLLM_") and v is not None})
    argv = list(model["argv"][1:])  # `serve MODEL ...`, without "vllm"
    argv[1] = folder
    args = parser.parse_args([*argv, "--load-format", "dummy"])
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    return AsyncEngineArgs.from_cli_args(args).create_engine_config()


def dummy_inputs(vllm_config) -> str:
    """What the GPU model runner's profile_run builds for the encoder, with the engine's own budget and cache."""
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import MultiModalBudget

    model_config = vllm_config.model_config
    budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY)
    if not budget.mm_max_toks_per_item:
        return "no modality reaches the encoder (the launcher's limits leave none): nothing is profiled"
    modality = budget.get_modality_with_max_tokens()
    inputs = MULTIMODAL_REGISTRY.get_dummy_mm_inputs(model_config, mm_counts={modality: 1}, cache=budget.cache)
    item = inputs["mm_kwargs"][modality][0]
    if item is None:
        raise RuntimeError(f"vLLM built no dummy {modality} item (the engine asserts one)")
    placeholders = sum(p.get_num_embeds() for p in inputs["mm_placeholders"][modality])
    return (f"{type(budget.processor).__name__} with {type(budget.cache).__name__ if budget.cache else 'no cache'}: "
            f"a dummy {modality} of {placeholders} placeholder tokens in a {len(inputs['prompt_token_ids'])}-token "
            f"prompt (max_model_len {model_config.max_model_len})")


SCREENSHOT_SIDE = 64  # pixels: a request's image (Claude Code sends screenshots), small so that it costs nothing


def request_image(vllm_config) -> str:
    """An image in a request, twice, as the API server handles it: decoded from a base64 PNG by vLLM's ImageMediaIO
    (Pillow), then through the processor with the API server's cache; the second time its item comes from the
    cache and only the prompt text reaches the HF processor."""
    import base64
    import io

    from PIL import Image
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.media.image import ImageMediaIO
    from vllm.multimodal.processing.inputs import ProcessorInputs
    from vllm.multimodal.registry import TimingContext

    png = io.BytesIO()
    Image.new("RGB", (SCREENSHOT_SIDE, SCREENSHOT_SIDE), (200, 40, 40)).save(png, "PNG")
    image = ImageMediaIO().load_base64("image/png", base64.b64encode(png.getvalue()).decode())
    cache = MULTIMODAL_REGISTRY.processor_cache_from_config(vllm_config)
    processor = MULTIMODAL_REGISTRY.create_processor(vllm_config.model_config, cache=cache)
    prompt = processor.dummy_inputs.get_dummy_text({"image": 1})
    lengths = []
    for _ in range(2):
        inputs = ProcessorInputs(prompt=prompt, mm_data_items=processor.info.parse_mm_data({"image": [image]}))
        lengths.append(len(processor.apply(inputs, timing_ctx=TimingContext(enabled=False))["prompt_token_ids"]))
    if lengths[0] != lengths[1]:
        raise RuntimeError(f"the same image gave {lengths[0]} then {lengths[1]} prompt tokens (the second from the cache)")
    return (f"a {SCREENSHOT_SIDE}x{SCREENSHOT_SIDE} PNG in a request, twice with {type(cache).__name__ if cache else 'no cache'}: "
            f"{lengths[0]} prompt tokens each time")


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as f:
        jobs = json.load(f)
    infos = copy_model_infos(jobs["entrypoint"])
    host_platform(jobs["host"])
    import transformers

    start_env = {name: value for name, value in os.environ.items() if name.startswith("VLLM_")}
    results, text_only, parser = [], [], None
    for model in jobs["models"]:
        began = time.monotonic()
        takes_images = multimodal(model["architecture"])
        if takes_images is False:
            text_only.append(model["key"])
            continue
        if takes_images and model.get("argv") is None:  # no pod of this variant's GPU starts it
            results.append({"key": model["key"], "ok": True, "detail": "not started on this GPU",
                             "skipped": f"the launcher refuses it on the {jobs['host']['name']}: {model.get('refusal')}"})
            continue
        try:
            if takes_images is None:
                raise ValueError(f"vLLM's registry does not know the architecture {model['architecture']}")
            if not model.get("files"):
                raise ValueError("no model folder for it: add the entry to benchmarks/gpu/catalogue.toml (a scaled "
                                 "config with its vision_config; catalogue_configs.py writes the processor files)")
            folder = os.path.join(tempfile.mkdtemp(prefix="prebake-mm-"), model["key"])
            os.makedirs(folder)
            for name, text in model["files"].items():
                with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                    f.write(text)
            parser = parser or serve_parser()
            vllm_config = engine_config(parser, model, folder, start_env)
            ok, detail = True, f"{dummy_inputs(vllm_config)}; {request_image(vllm_config)}"
        except BaseException as err:  # vLLM's refusal, transformers' ValueError: the finding itself
            ok = False
            chain, cause = [], err
            while cause is not None and len(chain) < 3:  # vLLM wraps the processor's error: say both
                chain.append(f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1][:400] if str(cause) else ''}")
                cause = cause.__cause__
            detail = " <- ".join(chain)
            print(traceback.format_exc(), file=sys.stderr)
        results.append({"key": model["key"], "ok": ok, "detail": detail,
                        "seconds": round(time.monotonic() - began, 1)})
    report = {"ok": all(r["ok"] for r in results), "results": results, "text_only": text_only,
              "transformers": transformers.__version__, "model_infos": infos}
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
