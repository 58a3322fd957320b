"""vLLM's CUDA platform set before anything builds the `vllm serve` parser; imported first by the programs
that build it (serve_parser.py, vllm_facts_derive.py)."""

# vLLM builds the `vllm serve` parser only on a known platform: EngineArgs.add_cli_args calls each
# config's default factory, and DeviceConfig() raises "Failed to infer device type" on
# UnspecifiedPlatform. vLLM detects CUDA through NVML (nvmlInit, then a GPU count > 0), which a
# build machine has neither the library nor a GPU for, and no variable forces the platform. But
# vllm.platforms lets `current_platform` be assigned (its module __setattr__), so the check sets
# it to vLLM's OWN CUDA platform class, and does so before anything imports
# vllm.engine.arg_utils, which binds the name at import. Importing vllm.platforms.cuda loads
# vllm._C_stable_libtorch, which needs libcuda.so.1, the driver's library, present only on a GPU
# host: the stub built by the self-test stands in for it (every entry point returns
# CUDA_ERROR_STUB_LIBRARY; nothing calls it while parsing). Without the stub, a Platform subclass
# that declares device_type "cuda" stands in: parsing reads nothing else from the platform.
import vllm.platforms as platforms
try:
    from vllm.platforms.cuda import CudaPlatform as platform_class
    platform_note = "vLLM's own " + platform_class.__name__
except Exception as err:
    from vllm.platforms.interface import Platform, PlatformEnum

    class platform_class(Platform):
        _enum = PlatformEnum.CUDA
        device_name = device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"
    platform_note = "a stand-in CUDA Platform (vllm.platforms.cuda did not import: %s: %s)" % (
        type(err).__name__, str(err)[:200])
platforms.current_platform = platform_class()
