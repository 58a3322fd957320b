"""The image's self-test (prebake/selftest.py) run in a built image, as tests/integration/ break one condition at a
time: a variant's spec, the report by check, and one check that must fail alone."""

from __future__ import annotations

from pathlib import Path

import docker

from prebake import selftest
from prebake.variants import get_variant

SITE = "/opt/venv/lib/python3.11/site-packages"  # the images' site-packages
HUB_METADATA = f"{SITE}/huggingface_hub-1.33.0.dist-info/METADATA"  # a package the tiny lock pins


def spec_of(name: str, images_dir: Path, checks: list[str] | None = None, **vllm_args) -> dict:
    """The self-test spec of variant `name` of `images_dir`, with only `checks` where given."""
    variant = get_variant(name, images_dir)
    spec = selftest.spec_for(variant, (images_dir / variant.stack.lock).read_text())
    if checks is not None:
        spec["checks"] = checks
    if vllm_args:
        spec["vllm_args"].update(vllm_args)
    return spec


def results_of(client: docker.DockerClient, image: str, spec: dict) -> tuple[int, dict]:
    """The self-test's exit status in `image` and its report, by check."""
    status, report, stderr = selftest.run_in_image(client, image, spec)
    assert report, f"no report; stderr:\n{stderr[-3000:]}"
    return status, {item["check"]: item for item in report}


def failed_alone(client: docker.DockerClient, image: str, spec: dict, check: str) -> str:
    """Run the checks; `check` must fail and every other one pass. Returns its detail."""
    status, results = results_of(client, image, spec)
    assert status == 1, results
    assert [name for name, item in results.items() if not item["ok"]] == [check], results
    return results[check]["detail"]
