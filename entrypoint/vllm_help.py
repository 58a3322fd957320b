"""vLLM's own `vllm serve --help`, on a machine without a GPU: what `launch.py --help` points at.

    docker run --rm --entrypoint python IMAGE /opt/prebake/entrypoint/vllm_help.py [--help=KEYWORD]

`vllm serve --help` itself fails without a GPU ("RuntimeError: Failed to infer device type"): vLLM builds
its parser only on a known platform (DeviceConfig's default factory), detects CUDA through NVML, which a
machine without an NVIDIA driver lacks, and no variable forces the platform. `vllm.platforms` lets
`current_platform` be assigned, so this sets a CUDA Platform before anything imports vllm.engine.arg_utils,
then prints what vLLM prints (the same technique as the self-test's parser check, prebake/incontainer/
programs/serve_parser.py). Arguments are vLLM's own help arguments: none (the summary), --help=all,
--help=<config group> (--help=ModelConfig), --help=<option> (--help=max-model-len), or --help=page.
Runs in the image's Python (vLLM installed); nothing starts, nothing needs a GPU.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import vllm.platforms as platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class HelpPlatform(Platform):  # parsing reads the device type and nothing else of the platform
        _enum = PlatformEnum.CUDA
        device_name = device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"

    platforms.current_platform = HelpPlatform()
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    ServeSubcommand().subparser_init(top.add_subparsers(required=False, dest="subparser"))
    asked = [arg for arg in argv if arg.startswith("--help")] or ["--help"]
    try:
        top.parse_args(["serve", *asked])
    except SystemExit as done:  # argparse prints the help, then exits 0
        return done.code if isinstance(done.code, int) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
