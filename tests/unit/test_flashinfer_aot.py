"""The FlashInfer AOT build step's data: what the stacks ask for exists, and covers every variant's GPU."""

import importlib.util
import subprocess
import sys

from prebake.variants import REPO_ROOT, load_variants

SCRIPT = REPO_ROOT / "templates" / "files" / "flashinfer_aot.py"
spec = importlib.util.spec_from_file_location("flashinfer_aot", SCRIPT)
flashinfer_aot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flashinfer_aot)  # stdlib only at import: flashinfer is imported per module


def test_every_variant_prebuilds_known_modules_for_its_own_architecture():
    for images_dir in (REPO_ROOT / "images", REPO_ROOT / "images" / "offline"):
        for variant in load_variants(images_dir).values():
            stack = variant.stack
            assert stack.flashinfer_aot, variant.path  # the production stacks prebuild at least sampling
            assert set(stack.flashinfer_aot) <= set(flashinfer_aot.GENERATORS), variant.path
            # A variant whose architecture is missing here would compile on the pod: the .so has no SASS for it.
            assert variant.cuda_arch in stack.flashinfer_aot_archs, variant.path


def test_the_rendered_step_compiles_each_module_in_its_own_shared_stack_layer():
    from prebake.render import render

    rendered = {name: render(v) for name, v in load_variants().items()}
    assert len({r.stack_image for r in rendered.values()}) == 1  # still one shared stack
    stack = rendered["a40"].stack
    modules = load_variants()["a40"].stack.flashinfer_aot
    steps = [stack.index(f"flashinfer_aot.py {module} > /opt/prebake/flashinfer-aot/{module}.json") for module in modules]
    assert steps == sorted(steps)  # in the order of [stack] flashinfer_aot: adding one keeps the earlier layers
    runs = stack.split("\nRUN ")
    for module in modules:
        (run,) = [run for run in runs if f"flashinfer_aot.py {module} " in run]  # one RUN, one layer, per module
        assert "FLASHINFER_CUDA_ARCH_LIST='8.6 8.9 9.0 12.0' \\\n    FLASHINFER_NVCC_THREADS=4" in run


def _run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


def test_errors_name_what_to_do_before_anything_is_imported():
    unknown = _run("samplin", env={"FLASHINFER_CUDA_ARCH_LIST": "9.0"})
    assert unknown.returncode == 1
    assert "unknown module(s) ['samplin']: known are sampling, fp4_gemm_cutlass_sm120, fused_moe_120, fused_moe_90" in unknown.stderr
    no_arch = _run("sampling")
    assert no_arch.returncode == 1 and "set FLASHINFER_CUDA_ARCH_LIST" in no_arch.stderr
    assert "Traceback" not in unknown.stderr + no_arch.stderr


def test_ninja_jobs_are_capped_by_memory_as_well_as_cores():
    meminfo = "MemTotal:       16384000 kB\nMemAvailable:   {} kB\n"
    assert flashinfer_aot.default_jobs(meminfo.format(14_000_000), cores=4) == 3  # a 16 GB CI runner: not 6
    assert flashinfer_aot.default_jobs(meminfo.format(20_000_000), cores=2) == 2  # cores bound
    assert flashinfer_aot.default_jobs(meminfo.format(1_000_000), cores=16) == 1  # never none
    assert flashinfer_aot.default_jobs("MemTotal: 1 kB\n", cores=4) == 4  # no MemAvailable: cores
