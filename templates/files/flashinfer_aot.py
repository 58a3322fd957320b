"""Compile FlashInfer modules at image build (no GPU) where FlashInfer's own lookup finds them.

    flashinfer_aot.py MODULE [MODULE...]      (FLASHINFER_CUDA_ARCH_LIST names the architectures)

Each module is built with FlashInfer's JIT build (its JitSpec, ninja, nvcc, the same flags
as at run time), then copied to FlashInfer's AOT folder (`flashinfer.jit.env.FLASHINFER_AOT_DIR`,
i.e. site-packages/flashinfer/data/aot/<name>/<name>.so when no flashinfer-jit-cache package
is installed). At run time `JitSpecNvcc.build_and_load()` loads that file first and never
starts nvcc for it. The build folder is removed: only the .so files stay in the layer.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


# Module name -> (FlashInfer module, generator, architectures): FlashInfer's own JitSpec for it,
# with the flags it uses at run time, and the compute capabilities its generator compiles for
# (None: any). A variant lists the ones its GPU and models use (images/<variant>.toml
# flashinfer_aot); why each one: docs/caches.md.
GENERATORS = {
    # vLLM's FlashInfer top-k/top-p sampler (VLLM_USE_FLASHINFER_SAMPLER=1)
    "sampling": ("flashinfer.jit.sampling", "gen_sampling_module", None),
    # vLLM's FlashInferCutlassNvFp4LinearKernel on sm_12x (NVFP4 linear layers)
    "fp4_gemm_cutlass_sm120": ("flashinfer.jit.gemm", "gen_gemm_sm120_module_cutlass_fp4", ("12.0",)),
    # vLLM's FLASHINFER_CUTLASS NVFP4 MoE backend on sm_12x
    "fused_moe_120": ("flashinfer.jit.fused_moe", "gen_cutlass_fused_moe_sm120_module", ("12.0",)),
    # vLLM's FLASHINFER_CUTLASS block-FP8 MoE on sm_90, with expert parallel only (VL_EP=on):
    # in no variant's list, since under tensor parallel vLLM takes Triton there
    "fused_moe_90": ("flashinfer.jit.fused_moe", "gen_cutlass_fused_moe_sm90_module", ("9.0",)),
}


# nvcc's front end (cicc) took 3.7 GB for one file of the CUTLASS MoE (fused_moe_120) here, and
# FlashInfer leaves ninja at its default of cores + 2 jobs: 6 jobs on a 4-core, 16 GB CI runner
# would want about 22 GB. MAX_JOBS (FlashInfer's own variable) caps them by memory too.
GIB_PER_JOB = 4


def default_jobs(meminfo: str, cores: int) -> int:
    """As many ninja jobs as cores, but no more than MemAvailable holds at GIB_PER_JOB each."""
    available_kib = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemAvailable:")),
                         None)
    if available_kib is None:
        return cores
    return max(1, min(cores, available_kib // (GIB_PER_JOB << 20)))


def module_specs(name: str) -> list:
    module, function, _ = GENERATORS[name]
    return [getattr(importlib.import_module(module), function)()]


def link_with_libcuda_stub(folder: Path) -> None:
    """FlashInfer links every module with -lcuda (from $CUDA_HOME/lib64/stubs, which the CUDA
    wheels do not ship); a build without a GPU has no libcuda at all ("ld: cannot find -lcuda").
    An empty stub named libcuda.so.1 on LIBRARY_PATH satisfies the linker for this build only."""
    folder.mkdir(parents=True)
    subprocess.run(["gcc", "-shared", "-nostdlib", "-Wl,-soname,libcuda.so.1", "-o", str(folder / "libcuda.so"),
                    "-x", "c", "/dev/null"], check=True)
    os.environ["LIBRARY_PATH"] = os.pathsep.join(filter(None, [os.environ.get("LIBRARY_PATH"), str(folder)]))


def driver_symbols_unlinked(library: Path) -> list[str]:
    """Driver API symbols (cu*) the module leaves undefined without NEEDing libcuda.so.1: they
    would fail to resolve on the pod. Linked against the empty stub, a module that calls the
    driver API gets no NEEDED entry (the linker drops a library that defines nothing it uses)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(library, "rb") as handle:
        elf = ELFFile(handle)
        needed = {tag.needed for section in elf.iter_sections() if isinstance(section, DynamicSection)
                  for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"}
        symbols = elf.get_section_by_name(".dynsym")
        undefined = sorted(s.name for s in symbols.iter_symbols()
                           if s["st_shndx"] == "SHN_UNDEF" and s.name.startswith("cu") and s.name[2:3].isupper())
    return [] if "libcuda.so.1" in needed else undefined


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in GENERATORS]
    if unknown or not names:
        raise SystemExit(f"flashinfer_aot.py: unknown module(s) {unknown or '(none given)'}: known are "
                         f"{', '.join(GENERATORS)} (add FlashInfer's generator to GENERATORS)")
    if not os.environ.get("FLASHINFER_CUDA_ARCH_LIST"):
        raise SystemExit("flashinfer_aot.py: set FLASHINFER_CUDA_ARCH_LIST (e.g. '8.6 8.9 9.0 12.0'): "
                         "without a GPU FlashInfer cannot guess the architectures")
    if not os.environ.get("MAX_JOBS", "").isdigit():  # what FlashInfer itself would take
        with open("/proc/meminfo") as meminfo:
            os.environ["MAX_JOBS"] = str(default_jobs(meminfo.read(), os.cpu_count() or 1))
    build = Path(tempfile.mkdtemp(prefix="flashinfer-aot-"))
    os.environ["FLASHINFER_WORKSPACE_BASE"] = str(build)  # read at import: the JIT work goes there
    link_with_libcuda_stub(build / "stubs")
    from flashinfer.jit import build_jit_specs
    from flashinfer.jit import env as jit_env

    specs = [spec for name in names for spec in module_specs(name)]
    started = time.monotonic()
    build_jit_specs(specs, verbose=False, skip_prebuilt=False)
    seconds = time.monotonic() - started
    report = {"archs": os.environ["FLASHINFER_CUDA_ARCH_LIST"], "jobs": int(os.environ["MAX_JOBS"]),
              "seconds": round(seconds, 1), "modules": {}}
    for spec in specs:
        target = spec.aot_path  # FLASHINFER_AOT_DIR / name / name.so: what build_and_load() looks for
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(spec.jit_library_path, target)
        unlinked = driver_symbols_unlinked(target)
        if unlinked:
            raise SystemExit(f"flashinfer_aot.py: {spec.name} calls the CUDA driver ({', '.join(unlinked[:5])}) but was "
                             "linked against the build's libcuda stub without depending on libcuda.so.1: it would "
                             "not load on a pod; leave it to the JIT (docs/caches.md)")
        if not spec.is_aot:
            raise SystemExit(f"flashinfer_aot.py: {target} written but FlashInfer does not see {spec.name} as prebuilt")
        report["modules"][spec.name] = {"path": str(target), "bytes": target.stat().st_size}
    shutil.rmtree(build)
    report["aot_dir"] = str(jit_env.FLASHINFER_AOT_DIR)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
