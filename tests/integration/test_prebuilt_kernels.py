"""Caches on the volume and FlashInfer modules prebuilt, checked inside built images.

On the tiny test image (CI): the launcher in the image, with a real volume mounted at
/workspace, points every cache there (found through the container's own mountinfo), and the
one cache library that image holds (huggingface_hub) reads the variable the table says.
On the real a40 image (slow; skips when absent): every library of entrypoint/caches.toml
reads its variable in the image's own code; a run of the launcher's plan that compiles
(Inductor, FlashInfer's nvcc JIT, Triton's launcher) writes no cache outside the volume; the
self-test's flashinfer-aot check says it carries no FlashInfer module, and fails once another
variant's is there. On the real ada image (slow): its one module, compiled for 8.9, loads
without nvcc, and the check fails once it is removed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import docker

import pytest

from entrypoint.launcher.caches import load_caches
from prebake import selftest
from prebake.variants import get_variant
from prebake_testing import REPO
from prebake_testing.hosts import fake_nvidia_smi_for_image

pytestmark = pytest.mark.docker

CACHES = load_caches()
PATH_VARS = {c.variable: c.path for c in CACHES if c.path}

# Run by the image's Python: for each cache entry, the file that reads it and whether it holds the evidence.
EVIDENCE_PROBE = r"""
import json, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
table = json.loads(sys.argv[1])
report = {}
for variable, reads_in, evidence in table:
    candidates = [os.path.join(root, name) for root, _, names in os.walk(site) for name in names
                  if os.path.join(root, name).endswith("/" + reads_in)]
    if not candidates:
        report[variable] = "absent"
        continue
    text = open(candidates[0], encoding="utf-8").read()
    report[variable] = "reads" if all(e in text for e in evidence) else "no evidence in " + candidates[0]
print(json.dumps(report))
"""


def _evidence(client, image: str) -> dict:
    table = [[c.variable, c.reads_in, list(c.evidence)] for c in CACHES if c.reads_in]
    out = client.containers.run(image, entrypoint=["/opt/venv/bin/python", "-c", EVIDENCE_PROBE, json.dumps(table)],
                                network_disabled=True, remove=True)
    return json.loads(out.decode().strip().splitlines()[-1])


def _dry_run(client, image: str, tmp_path: Path, volume: Path | None, env: dict | None = None) -> dict:
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    volumes = {str(fake): {"bind": "/opt/fake", "mode": "ro"}}
    if volume is not None:
        volume.mkdir(exist_ok=True)
        volumes[str(volume)] = {"bind": "/workspace", "mode": "rw"}
    out = client.containers.run(image, command=["--dry-run"], environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi", **(env or {})},
                                volumes=volumes, network_disabled=True, remove=True)
    return json.loads(out.decode())


def test_the_launcher_in_the_image_finds_the_volume_and_moves_every_cache(client, tiny, tmp_path):
    image = tiny["image"]
    plan = _dry_run(client, image, tmp_path, tmp_path / "volume")
    for variable, path in PATH_VARS.items():
        assert plan["env"][variable] == f"/workspace/{path}", variable
    decision = [d for d in plan["decisions"] if d["topic"] == "caches"][0]
    assert decision["why"] == "/workspace is a mounted volume (VL_CACHE_ROOT unset)"
    # A template's own value wins; without a volume nothing moves (the container disk is no better).
    kept = _dry_run(client, image, tmp_path, tmp_path / "volume", {"HF_HOME": "/workspace/hf"})
    assert "HF_HOME" not in kept["env"] and kept["env"]["TRITON_CACHE_DIR"] == f"/workspace/{PATH_VARS['TRITON_CACHE_DIR']}"
    bare = _dry_run(client, image, tmp_path, None)
    assert not set(bare["env"]) & set(PATH_VARS)


def test_huggingface_hub_in_the_image_reads_hf_home(client, tiny):
    # The tiny image holds one library of the table; the rest are checked on the a40 image (slow).
    assert _evidence(client, tiny["image"])["HF_HOME"] == "reads"
    out = client.containers.run(tiny["image"], entrypoint=["/opt/venv/bin/python", "-c",
                                "import huggingface_hub.constants as c; print(c.HF_HUB_CACHE)"],
                                environment={"HF_HOME": "/workspace/huggingface"}, network_disabled=True, remove=True)
    assert out.decode().strip() == "/workspace/huggingface/hub"


# --- the real a40 image ---------------------------------------------------------------------


@pytest.mark.slow
def test_every_library_in_the_a40_image_reads_its_cache_variable(client, a40):
    report = _evidence(client, a40)
    assert report == {c.variable: "reads" for c in CACHES if c.reads_in}


# Compiles what can be compiled without a GPU, with the environment the launcher planned:
# Inductor (C++ on the CPU), a FlashInfer module the image does not prebuild (nvcc), Triton's
# and humming's imports; then lists every file the container wrote outside the volume.
WORKLOAD = r"""
import json, os, subprocess, sys
plan = json.loads(subprocess.run([sys.executable, "/opt/prebake/entrypoint/launch.py", "--dry-run"],
                                 capture_output=True, text=True, check=True).stdout)
os.environ.update({k: v for k, v in plan["env"].items() if v is not None})
os.environ["FLASHINFER_CUDA_ARCH_LIST"] = "8.6"
# No GPU here: the libcuda a pod's runtime mounts is stood in for by the AOT step's link stub, in /tmp
# (the script is mounted at /opt/fake-aot, on PYTHONPATH: a40's image has no kernels image, so no copy of it).
from pathlib import Path
from flashinfer_aot import link_with_libcuda_stub
link_with_libcuda_stub(Path("/tmp/driver-stub"))
import torch
f = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)
f(torch.randn(64, 64))
from flashinfer.jit.activation import gen_act_and_mul_module
gen_act_and_mul_module("gelu_tanh").build_and_load()
import triton, humming, vllm  # noqa: F401
print(json.dumps({k: os.environ[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE")}))
"""


@pytest.mark.slow
def test_a_compiling_run_writes_no_cache_outside_the_volume(client, a40, tmp_path):
    volume = tmp_path / "volume"
    volume.mkdir()
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    container = client.containers.run(
        a40, entrypoint=["/opt/venv/bin/python", "-c", WORKLOAD], detach=True, network_disabled=True,
        environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi", "PYTHONPATH": "/opt/fake-aot"},
        volumes={str(volume): {"bind": "/workspace", "mode": "rw"}, str(fake): {"bind": "/opt/fake", "mode": "ro"},
                 str(AOT_SCRIPT): {"bind": "/opt/fake-aot/flashinfer_aot.py", "mode": "ro"}})
    try:
        status = container.wait(timeout=1500)["StatusCode"]
        logs = container.logs().decode(errors="replace")
        assert status == 0, logs[-3000:]
        written = sorted(c["Path"] for c in container.diff() or [] if c["Kind"] == 1)  # added paths
    finally:
        container.remove(force=True)
    # Allowed: Python's bytecode of the workload's imports (not a compile cache of vLLM's stack), this
    # test's own files, and Inductor's precompiled C++ headers, which torch 2.13 keeps under
    # default_cache_dir() whatever TORCHINDUCTOR_CACHE_DIR says (codecache._HEADER_DIR): only its
    # CPU backend writes them, and moving them would take TMPDIR, every temporary file (docs/caches.md).
    allowed = ("/workspace", "/opt/fake", "/tmp/driver-stub", "/tmp/cc", "/tmp/torchinductor_root/precompiled_headers")
    stray = [p for p in written if "__pycache__" not in p and not p.startswith(allowed)
             and p not in ("/tmp", "/root", "/opt", "/tmp/torchinductor_root")]
    assert stray == [], f"written outside the volume: {stray}"
    assert any(volume.glob("cache/torchinductor/**/*.py")), "Inductor wrote nothing to the volume"
    assert any(volume.glob("cache/flashinfer/.cache/flashinfer/**/*.so")), "FlashInfer compiled nothing on the volume"


def _aot_results(client, image: str, variant: str) -> tuple[int, dict]:
    spec = selftest.spec_for(get_variant(variant, REPO / "images" / "offline"),
                             (REPO / "images" / "offline" / "locks" / "cu13-py311.txt").read_text())
    spec["checks"] = ["flashinfer-aot"]
    status, report, stderr = selftest.run_in_image(client, image, spec)
    assert report, stderr[-3000:]
    return status, report[0]


def _aot_results_after(client, image: str, command: str, variant: str) -> tuple[int, dict]:
    """The check's result on `image` changed by a shell command (the changed image is removed after)."""
    container = client.containers.run(image, entrypoint=["sh", "-c", command], detach=True, network_disabled=True)
    try:
        assert container.wait()["StatusCode"] == 0
        changed = container.commit().id
    finally:
        container.remove(force=True)
    try:
        return _aot_results(client, changed, variant)
    finally:
        client.images.remove(changed, force=True)


AOT_DIR = "/opt/venv/lib/python3.11/site-packages/flashinfer/data/aot"
AOT_SCRIPT = REPO / "templates" / "files" / "flashinfer_aot.py"


@pytest.fixture(scope="module")
def ada(client) -> str:
    """The real ada image's id (its kernels image holds sampling for 8.9), or a skip where it is not built."""
    name = os.environ.get("PREBAKE_TEST_ADA_IMAGE", "prebake-offline:ada-vllm0.27.1-cu13.0")
    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:
        pytest.skip(f"{name} is not built here (./build.py --images-dir images/offline --variant ada ...)")


@pytest.mark.slow
@pytest.mark.parametrize("variant, detail", [
    ("a40", "carries no FlashInfer module, as a40.toml flashinfer_aot says"),  # and says so
    ("ada", "loaded without nvcc, compiled for 8.9 only: sampling ("),
])
def test_each_image_carries_its_variants_modules_for_its_architecture(client, request, variant, detail):
    status, result = _aot_results(client, request.getfixturevalue(variant), variant)
    assert status == 0 and result["ok"], result
    assert result["detail"].startswith(detail)


@pytest.mark.slow
def test_another_variants_module_in_the_a40_image_fails_the_check(client, a40):
    status, result = _aot_results_after(
        client, a40, f"mkdir -p {AOT_DIR}/fused_moe_120 && touch {AOT_DIR}/fused_moe_120/fused_moe_120.so", "a40")
    assert status == 1 and not result["ok"]
    assert "holds FlashInfer modules this variant does not list (a40.toml flashinfer_aot: none): fused_moe_120" \
        in result["detail"]


@pytest.mark.slow
def test_the_flashinfer_aot_check_fails_when_a_listed_module_is_removed(client, ada):
    status, result = _aot_results_after(client, ada, f"rm -r {AOT_DIR}/sampling", "ada")
    assert status == 1 and not result["ok"]
    assert result["detail"].startswith("a prebuilt FlashInfer module would compile on the pod")
    assert "aot/sampling/sampling.so" in result["detail"]
