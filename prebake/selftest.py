"""The self-test every build runs on its image before tagging it: no tag for an image that fails."""

import json
import sys
from pathlib import Path
from typing import Any

import docker

from prebake.errors import PrebakeError
from prebake.lockfile import pinned_versions
from prebake.variants import Variant

SCRIPT = Path(__file__).with_name("incontainer_selftest.py")
MARKER = "/opt/.image_prebaked"
PYTHON = "/opt/venv/bin/python"
LAUNCHER = "/opt/prebake/entrypoint/launch.py"
# The host profiles the entrypoint's tests use, and their fake nvidia-smi: vllm-args runs the
# image's launcher against each (sent in the spec: the image has no copy of the tests).
HOSTS_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hosts"
VLLM_ARGS_HOSTS = ("a40x2_570", "a40x1_580", "rtx6000ada_550", "h200_580", "rtxpro6000_580")
KNOB_HOST = "a40x2_570"  # the knob sweep's host: two GPUs, so tensor-parallel options appear too
# Distribution -> module, imported when the lock holds the distribution.
IMPORTS = {"vllm": "vllm", "torch": "torch", "fastokens": "fastokens", "humming-kernels": "humming",
           "huggingface-hub": "huggingface_hub"}
TOOLCHAIN_CHECKS = ("nvcc", "nvrtc", "one-cuda-release")


def spec_for(variant: Variant, lock_text: str) -> dict[str, Any]:
    pins = pinned_versions(lock_text)
    checks = ["marker", "pins", "imports", "dependencies"]
    if variant.stack.has_cuda_toolchain:
        checks += TOOLCHAIN_CHECKS
    checks += ["vllm-args", "vllm-knobs"]  # skipped, and reported so, when the lock pins no vllm
    if variant.stack.flashinfer_aot:
        checks.append("flashinfer-aot")
    return {
        "checks": checks,
        "marker": MARKER,
        "variant": variant.name,
        "cuda": variant.stack.cuda,
        "cuda_arch": variant.cuda_arch,
        "pins": pins,
        "imports": [module for name, module in IMPORTS.items() if name in pins],
        "flashinfer_aot": list(variant.stack.flashinfer_aot),
        **({"vllm_args": vllm_args_spec()} if "vllm" in pins else {}),
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


def run_in_image(client: docker.DockerClient, image: str, spec: dict[str, Any]) -> tuple[int, list[dict], str]:
    """Run the checks in a container without network; return (exit code, report, stderr)."""
    container = client.containers.create(
        image, entrypoint=[PYTHON, "-c", SCRIPT.read_text(), json.dumps(spec)], network_disabled=True,
    )
    try:
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


def run(client: docker.DockerClient, image_id: str, variant: Variant, lock_text: str) -> None:
    spec = spec_for(variant, lock_text)
    status, report, stderr = run_in_image(client, image_id, spec)
    for item in report:
        mark = "skip" if item.get("skipped") else "ok  " if item["ok"] else "FAIL"
        print(f"[self-test] {mark} {item['check']}: {item['detail']}", file=sys.stderr, flush=True)
    if status != 0 or not report:
        failed = [item["check"] for item in report if not item["ok"]]
        reason = f"checks failed: {', '.join(failed)}" if failed else f"the self-test crashed:\n{stderr[-2000:]}"
        raise PrebakeError(f"the {variant.name} image ({image_id[:19]}) failed its self-test, so it was not "
                           f"tagged; {reason}. See the lines above, and docs/selftest.md for what each check means.")
