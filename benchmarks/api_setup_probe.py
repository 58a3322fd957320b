"""Run INSIDE a built image: `vllm serve`'s own set-up of the API server, as far as it goes without a GPU.

    PYTHONPATH=/src:/src/prebake/incontainer/programs:/opt/prebake python api_setup_probe.py empty|copied
        (the checkout's prebake/ mounted at /src/prebake; /opt/prebake is the image's, its launcher)

vLLM's CUDA platform is set as the self-test sets it (prebake/incontainer/programs/vllm_platform.py, with its stub
libcuda.so.1); an 8B-like Qwen3 config (benchmarks/gpu/mkmodel.py's m8b) is made in /tmp/m8b. Then the serve
parser is built and `AsyncEngineArgs.create_engine_config()` runs, under cProfile, until it needs the GPU (its
device count): the registry's inspection of the architecture comes first. `copied`: VLLM_CACHE_ROOT gets the
launcher's copy of the image's baked model-info cache first. Prints one JSON line.
"""

import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time

M8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False,
       "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "max_position_embeddings": 40960,
       "rms_norm_eps": 1e-6, "rope_theta": 1000000, "torch_dtype": "bfloat16", "vocab_size": 151936,
       "use_cache": True, "initializer_range": 0.02, "head_dim": 128, "hidden_size": 4096,
       "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
       "tie_word_embeddings": False}


def main(mode: str) -> dict:
    if "PROBE_STUBBED" not in os.environ:  # the stub must be on the loader's path before the process starts
        from prebake.incontainer.stub_libcuda import build_stub_libcuda
        folder = tempfile.mkdtemp(prefix="stub-")
        stub, _ = build_stub_libcuda(folder)
        root = tempfile.mkdtemp(prefix="vllm-cache-root-")
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  dict(os.environ, PROBE_STUBBED="1", LD_LIBRARY_PATH=stub or "", VLLM_CACHE_ROOT=root,
                       HF_HUB_OFFLINE="1"))
    out: dict = {"mode": mode}
    os.makedirs("/tmp/m8b", exist_ok=True)
    with open("/tmp/m8b/config.json", "w") as handle:
        json.dump(M8B, handle)
    if mode == "copied":
        from entrypoint.launcher.modelinfos import copy_modelinfos, decide_modelinfos
        copies, decision = decide_modelinfos(os.environ)
        out["copy"] = decision.decision if copy_modelinfos(copies) is None else "failed"
    began = time.monotonic()
    from vllm_platform import platform_note
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    out["platform"] = platform_note
    out["imports_s"] = round(time.monotonic() - began, 2)
    began = time.monotonic()
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(
        ["--model", "/tmp/m8b", "--load-format", "dummy", "--max-model-len", "4096", "--tokenizer", "/tmp/m8b",
         "--limit-mm-per-prompt", '{"video":0}', "--reasoning-parser", "qwen3"])
    out["parser_s"] = round(time.monotonic() - began, 2)
    profile = cProfile.Profile()
    began = time.monotonic()
    profile.enable()
    try:
        AsyncEngineArgs.from_cli_args(args).create_engine_config(UsageContext.OPENAI_API_SERVER)
        out["stopped"] = "not: the engine config was made"
    except Exception as err:  # noqa: BLE001 - where the GPU is first needed is the figure's end
        out["stopped"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    profile.disable()
    out["engine_config_s"] = round(time.monotonic() - began, 2)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(r"registry|subprocess|config/model|"
                                                                            r"transformers_utils", 8)
    out["profile"] = [line.strip()[:160] for line in text.getvalue().splitlines() if "/" in line][:8]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
