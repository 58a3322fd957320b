"""FlashInfer modules per variant: each variant compiles only its own GPU's, in a kernels image FROM the stack
that is named by what goes into it; the self-test's verdict on what an image carries."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prebake import cli
from prebake.errors import PrebakeError
from prebake.incontainer.checks import flashinfer_aot as aot_check
from prebake.render import committed_files, render
from prebake.variants import REPO_ROOT, load_variants

SCRIPT = REPO_ROOT / "templates" / "files" / "flashinfer_aot.py"
spec = importlib.util.spec_from_file_location("flashinfer_aot", SCRIPT)
flashinfer_aot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flashinfer_aot)  # stdlib only at import: flashinfer is imported per module
NVFP4 = ["fp4_gemm_cutlass_sm120", "fused_moe_120"]


def census_table() -> dict[str, list[str]]:
    """docs/caches.md's "Prebuilt per variant" table: variant -> the modules it lists."""
    text = (REPO_ROOT / "docs" / "caches.md").read_text()
    section = text.split("## Prebuilt per variant", 1)[1].split("| variant |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| [^|]+ \| ([^|]+) \|", section, flags=re.M)
    assert rows, "docs/caches.md has no 'Prebuilt per variant' table"
    return {name: re.findall(r"`([a-z0-9_]+)`", modules) for name, modules in rows}


def test_each_variant_lists_the_modules_the_census_gives_its_gpu():
    documented = census_table()
    for images_dir in (REPO_ROOT / "images", REPO_ROOT / "images" / "offline"):
        variants = load_variants(images_dir)
        assert {name: list(v.flashinfer_aot) for name, v in variants.items()} == documented, images_dir
    assert documented["a40"] == []  # the sampler stays off on a40, and nothing else is prebuildable there
    assert documented["blackwell"][-2:] == NVFP4  # blackwell keeps its NVFP4 linear layers and MoE
    assert not any(set(NVFP4) & set(modules) for name, modules in documented.items() if name != "blackwell")


def test_every_module_the_census_marks_prebuilt_is_in_that_variants_list():
    text = (REPO_ROOT / "docs" / "caches.md").read_text()
    header, _, rest = text.partition("| model (quantisation, architecture) |")
    columns = [cell.split()[0] for cell in rest.splitlines()[0].strip(" |").split("|")]
    rows = [line for line in rest.split("\n\n", 1)[0].splitlines()[2:] if line.startswith("|")]
    assert columns == ["a40", "ada", "hopper", "blackwell"] and rows
    variants = load_variants()
    for row in rows:
        for name, cell in zip(columns, row.strip(" |").split("|")[1:]):
            if "**P**" in cell:
                modules = [m for m in re.findall(r"`([a-z0-9_]+)`", cell) if m in flashinfer_aot.GENERATORS]
                assert modules and set(modules) <= set(variants[name].flashinfer_aot), (name, row[:40])


def test_the_shared_stack_carries_no_kernels():
    rendered = {name: render(v) for name, v in load_variants().items()}
    assert len({r.stack_image for r in rendered.values()}) == 1  # still one shared stack
    stack = rendered["a40"].stack
    assert "flashinfer_aot" not in stack and "FLASHINFER_CUDA_ARCH_LIST" not in stack


def test_each_kernels_image_compiles_its_modules_for_its_variants_architecture_only():
    for name, variant in load_variants().items():
        rendered = render(variant)
        if not variant.flashinfer_aot:
            assert rendered.kernels is None and rendered.kernels_image is None
            assert rendered.from_image == rendered.stack_image
            assert "kernels.Dockerfile" not in {p.name for p in committed_files(variant)}
            continue
        kernels = rendered.kernels
        assert f"ARG STACK_IMAGE={rendered.stack_image}\nFROM ${{STACK_IMAGE}}" in kernels
        assert f"ARG STACK_IMAGE={rendered.kernels_image}\nFROM ${{STACK_IMAGE}}" in rendered.variant
        runs = kernels.split("\nRUN ")[1:]
        assert len(runs) == len(variant.flashinfer_aot)  # one layer per module, in the variant's order
        for run, module in zip(runs, variant.flashinfer_aot):
            assert f"flashinfer_aot.py {module} " in run
            assert f"FLASHINFER_CUDA_ARCH_LIST={variant.cuda_arch} " in run, name


def _images(tmp_path: Path) -> Path:
    target = tmp_path / "images"
    shutil.copytree(REPO_ROOT / "images", target, symlinks=False)
    return target


def test_kernels_are_addressed_by_stack_architecture_and_modules_not_by_variant(tmp_path, monkeypatch, capsys):
    images = _images(tmp_path)
    (images / "l40s.toml").write_text((images / "ada.toml").read_text().replace("RTX 6000 Ada", "L40S only"))
    variants = load_variants(images)
    ada, l40s, hopper = (render(variants[name]) for name in ("ada", "l40s", "hopper"))
    assert ada.kernels_image == l40s.kernels_image  # same stack, architecture, modules: built once
    assert ada.kernels != l40s.kernels  # though each file's header names its own variant
    # and CI builds that set in one job, not two
    assert cli.main(["matrix", "--kernels", "--images-dir", str(images)]) == 0
    assert json.loads(capsys.readouterr().out)["include"] == [{"variant": v} for v in ("ada", "blackwell", "hopper")]
    assert ada.kernels_image != hopper.kernels_image  # another architecture
    # another stack: new kernels
    common = images / "common.toml"
    common.write_text(common.read_text().replace('"numactl",', '"numactl", "less",'))
    assert render(load_variants(images)["ada"]).kernels_image != ada.kernels_image
    # another build script: new kernels
    changed = tmp_path / "flashinfer_aot.py"
    changed.write_text(SCRIPT.read_text() + "\n# changed\n")
    monkeypatch.setattr("prebake.render.FLASHINFER_AOT", changed)
    assert render(variants["ada"]).kernels_image != ada.kernels_image


@pytest.mark.parametrize("modules, message", [
    ('["samplin"]', "key 'flashinfer_aot': unknown module 'samplin'; known are sampling, fp4_gemm_cutlass_sm120"),
    ('["fused_moe_120"]', "key 'flashinfer_aot': fused_moe_120 compiles for 12.0 only, not this variant's "
                          "cuda_arch 8.6; remove it"),
    ('["sampling", "sampling"]', "key 'flashinfer_aot' lists 'sampling' twice"),
    ('"sampling"', "key 'flashinfer_aot' must be"),
])
def test_a_module_list_that_cannot_build_is_an_error_naming_the_file_and_key(tmp_path, modules, message):
    images = _images(tmp_path)
    a40 = images / "a40.toml"
    a40.write_text(a40.read_text().replace("flashinfer_aot = []", f"flashinfer_aot = {modules}"))
    with pytest.raises(PrebakeError) as error:
        load_variants(images)
    assert str(error.value).startswith(f"{a40}: ") and message in str(error.value)


def _found(present, loaded, archs=None):
    return {"aot_dir": "/x/aot", "present": present, "loaded": loaded, "archs": archs or {n: "8.9" for n in loaded}}


def test_the_check_passes_only_for_exactly_the_listed_modules_of_the_variants_architecture():
    ada = {"flashinfer_aot": ["sampling"], "cuda_arch": "8.9", "flashinfer_aot_source": "ada.toml flashinfer_aot"}
    ok, detail = aot_check._verdict(ada, _found(["sampling"], {"sampling": 6_000_000}))
    assert ok and detail == "loaded without nvcc, compiled for 8.9 only: sampling (6.0 MB)"
    # another variant's module in the image
    ok, detail = aot_check._verdict(ada, _found(["fused_moe_120", "sampling"], {"sampling": 1}))
    assert not ok and "does not list (ada.toml flashinfer_aot: sampling): fused_moe_120" in detail
    # the listed module, compiled for every variant's GPU as the shared stack used to
    ok, detail = aot_check._verdict(ada, _found(["sampling"], {"sampling": 1}, {"sampling": "8.6 8.9 9.0 12.0"}))
    assert not ok and "sampling (8.6 8.9 9.0 12.0)" in detail


def test_a_variant_with_no_module_says_so_and_fails_when_one_is_there():
    a40 = {"flashinfer_aot": [], "cuda_arch": "8.6", "flashinfer_aot_source": "a40.toml flashinfer_aot"}
    ok, detail = aot_check._verdict(a40, _found([], {}))
    assert ok and detail.startswith("carries no FlashInfer module, as a40.toml flashinfer_aot says")
    ok, detail = aot_check._verdict(a40, _found(["sampling"], {}))
    assert not ok and detail.endswith("none): sampling; another variant's kernels are in its stack or kernels image")


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
