"""The registry of checks, in the order they run.

A check is a module here with NAME (as in the report), LEVEL (common.STACK or common.VARIANT),
optionally NEEDS_CUDA_TOOLCHAIN = True, and check(spec) -> (ok, detail), raising
common.Skipped when it does not apply to the image. Adding one: that module, plus its name in
the import and in CHECKS below (docs/selftest.md).
"""

from . import (bridge, claude_code_sessions, dependencies, flashinfer_aot, imports, marker, mm_dummy_inputs, modelinfos,
               nvcc, nvrtc, one_cuda_release, pins, sleep_mode, thinking_controls, vllm_args, vllm_facts_match,
               vllm_knobs)

CHECKS = (marker, pins, imports, dependencies, bridge, nvcc, nvrtc, one_cuda_release, vllm_facts_match, vllm_args,
          vllm_knobs, thinking_controls, claude_code_sessions, mm_dummy_inputs, sleep_mode, flashinfer_aot, modelinfos)

BY_NAME = {module.NAME: module for module in CHECKS}
