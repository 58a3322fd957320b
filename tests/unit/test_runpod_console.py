"""`runpod template` for a person at RunPod's console: the same template field by field beside the API body,
a local image name refused, a registry RunPod cannot reach or leaves implied warned about, and the drivers an
image without cuda-compat needs."""

from __future__ import annotations

import json

import pytest

from prebake import runpod
from prebake.cli import main

IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-0123456789ab"
TAG = "a40-vllm0.27.1-cu13.0-0123456789ab"


def template(capsys: pytest.CaptureFixture[str], image: str = IMAGE, *args: str) -> tuple[int, str, str]:
    status = main(["runpod", "template", "--variant", "a40", "--image", image, "--image-size-gb", "8", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_console_form_says_what_goes_in_each_field(capsys):
    status, out, err = template(capsys, IMAGE, "--api-key-secret", "prebake_api_key", "--registry-auth-id", "cred42")
    assert status == 0
    payload = json.loads(out)  # stdout stays the API body alone, for `> body.json`
    assert "Templates > New Template" in err
    fields = {label: value.strip() for label, value in (line.strip().split(": ", 1) for line in err.splitlines()
              if line.startswith("  ") and not line.startswith("      ") and ": " in line)}
    assert fields["Template Name"] == payload["name"] and fields["Container Image"] == IMAGE
    assert fields["Container Disk"] == f"{payload['disk']} GB"
    assert fields["Volume Disk"] == f"{payload['mounts']['persistent']['size']} GB"
    assert fields["Volume Mount Path"] == "/workspace" and fields["Expose HTTP Ports"] == "8080"
    assert "cred42" in fields["Container Registry Credentials"] and "leave empty" in fields["Container Start Command"]
    rows = [line.strip() for line in err.split("\n\n")[0].splitlines() if line.startswith("      ")]
    assert rows == [f"{key} = {value}" for key, value in payload["env"].items()]
    assert "VLLM_API_KEY = {{ RUNPOD_SECRET_prebake_api_key }}" in rows
    assert "driver 580 or newer" in err and "--without cuda-compat" in err


@pytest.mark.parametrize("image", [f"prebake-offline:{TAG}", f"prebake:{TAG}",
                                   f"prebake@sha256:{'ab' * 32}"])
def test_a_local_image_name_is_refused(capsys, image):
    status, out, err = template(capsys, image)
    assert (status, out) == (1, "") and "names no registry" in err and "--registry ghcr.io/<owner> --push" in err


@pytest.mark.parametrize("image, warning", [
    (f"owner/prebake:{TAG}", "names no registry host: RunPod pulls it from Docker Hub"),
    (f"localhost:5000/prebake:{TAG}", "RunPod's hosts cannot reach it"),
    (f"127.0.0.1:5000/owner/prebake:{TAG}", "RunPod's hosts cannot reach it"),
    (f"ghcr.io/owner/prebake-offline:{TAG}", "offline flavour, built --without cuda-compat"),
])
def test_images_runpod_may_not_pull_or_run_are_warned_about(capsys, image, warning):
    status, out, err = template(capsys, image)
    assert status == 0 and json.loads(out)["image"] == image
    assert f"warning: image '{image}'" in err and warning in err


def test_a_registry_image_gets_no_warning(capsys):
    status, _, err = template(capsys, IMAGE)
    assert status == 0 and "warning" not in err
    assert runpod.image_warnings(f"docker.io/owner/prebake:{TAG}") == []
