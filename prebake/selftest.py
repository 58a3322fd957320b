"""The self-test every build runs on its image before tagging it: no tag for an image that fails."""

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import docker

from prebake import selftest_record
from prebake.errors import PrebakeError
from prebake.incontainer.checks import CHECKS
from prebake.lockfile import pinned_versions
from prebake.variants import Variant

PACKAGE = Path(__file__).with_name("incontainer")  # copied into the container, run as `python -m incontainer`
PACKAGE_PARENT = "/tmp/prebake-selftest"
MARKER = "/opt/.image_prebaked"
PYTHON = "/opt/venv/bin/python"
LAUNCHER = "/opt/prebake/entrypoint/launch.py"
BRIDGE = "/opt/prebake/entrypoint/bridge.py"  # the keep-alive bridge, which the bridge check starts
# The host profiles the entrypoint's tests use, and their fake nvidia-smi: vllm-args runs the
# image's launcher against each (sent in the spec: the image has no copy of the tests).
HOSTS_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hosts"
VLLM_ARGS_HOSTS = ("a40x2_570", "a40x1_580", "rtx6000ada_550", "h200_580", "rtxpro6000_580")
KNOB_HOST = "a40x2_570"  # the knob sweep's host: two GPUs, so tensor-parallel options appear too
# The catalogue's models scaled down, as model folders (config, tokenizer, processor files): mm-dummy-inputs runs
# vLLM's multimodal profile on them. One writer for them, the GPU harness's; run, not imported (benchmarks/ is no
# package of the build's).
CATALOGUE_CONFIGS = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu" / "catalogue_configs.py"
# Distribution -> module, imported when the lock holds the distribution.
IMPORTS = {"vllm": "vllm", "torch": "torch", "fastokens": "fastokens", "humming-kernels": "humming",
           "huggingface-hub": "huggingface_hub",
           # Qwen3.5's Gated DeltaNet prefill on sm_90+ (vLLM's qwen_gdn_linear_attn.py) imports FlashInfer's
           # gdn_prefill, which imports CuTe DSL's `cutlass` through nvidia-cutlass-dsl's .pth file: without it the
           # engine died at the first request (seen on an H100, 2026-12-06, a stack installed without .pth files)
           "nvidia-cutlass-dsl": "cutlass", "flashinfer-python": "flashinfer.gdn_prefill"}


def checks_for(variant: Variant) -> list[str]:
    """The registry's checks that apply to the variant's stack, in run order. A check that depends
    on a package the lock may lack (vllm-args) is listed anyway and reports itself skipped."""
    return [check.NAME for check in CHECKS
            if variant.stack.has_cuda_toolchain or not getattr(check, "NEEDS_CUDA_TOOLCHAIN", False)]


def spec_for(variant: Variant, lock_text: str) -> dict[str, Any]:
    pins = pinned_versions(lock_text)
    return {
        "checks": checks_for(variant),
        "marker": MARKER,
        "bridge": BRIDGE,
        "variant": variant.name,
        "cuda": variant.stack.cuda,
        "cuda_arch": variant.cuda_arch,
        "pins": pins,
        "imports": [module for name, module in IMPORTS.items() if name in pins],
        "flashinfer_aot": list(variant.flashinfer_aot),
        "flashinfer_aot_source": f"{variant.path.name} flashinfer_aot",
        **({"vllm_args": vllm_args_spec(), "mm_models": mm_models_spec()} if "vllm" in pins else {}),
    }


def vllm_args_spec(launcher_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """What vllm-args needs inside the image: the host profiles, the fake nvidia-smi, the launcher."""
    try:
        hosts = {name: json.loads((HOSTS_DIR / f"{name}.json").read_text()) for name in VLLM_ARGS_HOSTS}
        fake_smi = (HOSTS_DIR / "fake_nvidia_smi.py").read_text()
    except OSError as e:
        raise PrebakeError(f"the self-test's vllm-args check needs the entrypoint's host profiles in {HOSTS_DIR} "
                           f"(run build.py from a full checkout): {e}") from None
    return {"launcher": LAUNCHER, "hosts": hosts, "fake_nvidia_smi": fake_smi, "knob_host": KNOB_HOST,
            "launcher_args": list(launcher_args)}


def mm_models_spec() -> dict[str, dict[str, str]]:
    """{catalogue key: {file name: text}}: the model folder of every scaled catalogue entry with a vision tower
    (`catalogue_configs.py --files`), for mm-dummy-inputs."""
    try:
        done = subprocess.run([sys.executable, str(CATALOGUE_CONFIGS), "--files"], capture_output=True, text=True,
                              timeout=60)
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        found, done = None, e
    if not isinstance(found, dict):
        said = done.stderr.strip()[-600:] if isinstance(done, subprocess.CompletedProcess) else str(done)
        raise PrebakeError(f"the self-test's mm-dummy-inputs check needs the catalogue's scaled model folders from "
                           f"{CATALOGUE_CONFIGS} --files (run build.py from a full checkout): {said}")
    return found


SPEC_FILE = f"{PACKAGE_PARENT}/spec.json"


def package_archive(spec: dict[str, Any] | None = None) -> bytes:
    """The in-container package (and the spec, as spec.json) as a tar for put_archive into /tmp:
    prebake-selftest/incontainer/..."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if spec is not None:
            data = json.dumps(spec).encode()
            info = tarfile.TarInfo(f"{Path(PACKAGE_PARENT).name}/{Path(SPEC_FILE).name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for path in selftest_record.package_files():
            info = tar.gettarinfo(str(path), arcname=f"{Path(PACKAGE_PARENT).name}/{PACKAGE.name}/"
                                                     f"{path.relative_to(PACKAGE).as_posix()}")
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    return buffer.getvalue()


def run_in_image(client: docker.DockerClient, image: str, spec: dict[str, Any]) -> tuple[int, list[dict], str]:
    """Run the checks in a container without network; return (exit code, report, stderr)."""
    container = client.containers.create(
        image, entrypoint=[PYTHON, "-m", PACKAGE.name, f"@{SPEC_FILE}"], working_dir=PACKAGE_PARENT,
        network_disabled=True,
    )
    try:
        if not container.put_archive(str(Path(PACKAGE_PARENT).parent), package_archive(spec)):
            raise PrebakeError(f"could not copy the self-test into a container of {image}")
        container.start()
        status = container.wait()["StatusCode"]
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    try:
        report = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = []
    return status, report, stderr


def run(client: docker.DockerClient, image_id: str, variant: Variant, lock_text: str,
        stack_image_id: str | None = None) -> None:
    """Self-test the image; raise PrebakeError (no tag) on a failure.

    With `stack_image_id` (the stack the image is built FROM), the stack checks' verdicts are
    recorded for that stack, and taken from the record instead of run when one exists
    (prebake/selftest_record.py); the variant checks run every time."""
    spec = spec_for(variant, lock_text)
    recorded = selftest_record.load(stack_image_id, spec) if stack_image_id else None
    if recorded:
        names = {item["check"] for item in recorded}
        spec = {**spec, "checks": [name for name in spec["checks"] if name not in names]}
    verdicts_key = None
    if stack_image_id and client is not None and "vllm_args" in spec:
        # vLLM's verdicts on argvs: a function of the stack and the image's environment
        env = client.images.get(image_id).attrs["Config"].get("Env") or []
        verdicts_key = selftest_record.verdicts_key(stack_image_id, env)
        spec = {**spec, "known_verdicts": selftest_record.load_verdicts(verdicts_key)}
        known_facts = selftest_record.load_facts(verdicts_key)
        if known_facts:
            spec["known_vllm_facts"] = known_facts
        spec["known_program_results"] = selftest_record.load_program_results(verdicts_key)
    status, report, stderr = run_in_image(client, image_id, spec)
    if stack_image_id and not recorded and status == 0:
        selftest_record.save(stack_image_id, spec, report)
    if verdicts_key:
        new = {k: v for item in report for k, v in item.pop("verdicts", {}).items()}
        if new:
            selftest_record.save_verdicts(verdicts_key, {**spec["known_verdicts"], **new})
        facts = [item.pop("vllm_facts") for item in report if "vllm_facts" in item]
        if facts and "known_vllm_facts" not in spec:
            selftest_record.save_facts(verdicts_key, facts[0])
        programs = {k: v for item in report for k, v in item.pop("program_results", {}).items()}
        if programs:
            selftest_record.save_program_results(verdicts_key, {**spec["known_program_results"], **programs})
    for item in recorded or []:
        print(f"[self-test] ok   {item['check']}: {item['detail']} (recorded for stack {stack_image_id[:19]}, "
              "not run again)", file=sys.stderr, flush=True)
    for item in report:
        mark = "skip" if item.get("skipped") else "ok  " if item["ok"] else "FAIL"
        took = f" [{item['seconds']:.1f} s]" if "seconds" in item else ""
        print(f"[self-test] {mark} {item['check']}: {item['detail']}{took}", file=sys.stderr, flush=True)
    if status != 0 or not report:
        failed = [item["check"] for item in report if not item["ok"]]
        reason = f"checks failed: {', '.join(failed)}" if failed else f"the self-test crashed:\n{stderr[-2000:]}"
        raise PrebakeError(f"the {variant.name} image ({image_id[:19]}) failed its self-test, so it was not "
                           f"tagged; {reason}. See the lines above, and docs/selftest.md for what each check means.")
