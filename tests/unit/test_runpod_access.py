"""`runpod template`: the pod's API key from a RunPod secret, the readme that says how to use it, and the
launcher's own checks on the template's whole environment."""

from __future__ import annotations

import json

import pytest

from prebake.cli import main

IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234"


def template(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_key_comes_from_a_runpod_secret_and_the_readme_says_how_to_use_it(capsys):
    status, out, _ = template(capsys, "--api-key-secret", "pod_key")
    assert status == 0
    payload = json.loads(out)
    assert payload["env"]["VLLM_API_KEY"] == "{{ RUNPOD_SECRET_pod_key }}"
    readme = payload["readme"]
    assert 'ANTHROPIC_BASE_URL=https://<pod id>-8080.proxy.runpod.net ANTHROPIC_AUTH_TOKEN="$VLLM_API_KEY" claude' \
        in readme and "/prebake/status.txt" in readme
    assert 'OpenAI(base_url="https://<pod id>-8080.proxy.runpod.net/v1", api_key="<key>")' in readme
    assert "x-api-key" in readme and "open to anyone" not in readme


def test_without_a_key_the_readme_says_the_endpoint_is_open(capsys):
    status, out, _ = template(capsys)
    assert status == 0 and "VLLM_API_KEY" not in json.loads(out)["env"]
    assert "anyone with the pod's URL can use it" in json.loads(out)["readme"]


def test_a_literal_key_in_the_template_is_warned_about(capsys):
    status, _, err = template(capsys, "--env", "VLLM_API_KEY=sk-123")
    assert status == 0 and "store it as a RunPod secret" in err
    status, _, err = template(capsys, "--env", "VLLM_API_KEY={{ RUNPOD_SECRET_k }}")
    assert status == 0 and "warning" not in err
    status, _, err = template(capsys, "--env", "VLLM_API_KEY=x", "--api-key-secret", "k")
    assert status == 1 and "give one" in err


@pytest.mark.parametrize("env, needle", [
    (["VL_INTERNAL_PORT=8080"], "is also the keep-alive bridge's port"),
    (["VL_PORT=9000", "VL_INTERNAL_PORT=9000"], "is also the keep-alive bridge's port"),
    (["VL_LOOK_MIN=20"], "VL_LOOK_MIN=20 is above VL_LOOK_MAX"),
    (["VL_HEARTBEAT=0.1"], "floods the client"),
    (["VL_PORT=70000"], "VL_PORT='70000'"),
    (["VL_SEQS=99999999999"], "VL_SEQS="),
    (["1BAD=x"], "not an environment variable name"),
    (["BAD NAME=x"], "not an environment variable name"),
])
def test_env_is_checked_as_the_launcher_checks_it_at_pod_start(capsys, env, needle):
    status, _, err = template(capsys, *[arg for pair in env for arg in ("--env", pair)])
    assert status == 1 and needle in err and "Traceback" not in err, err


def test_a_secret_name_is_checked(capsys):
    status, _, err = template(capsys, "--api-key-secret", "bad name }}")
    assert status == 2 and "secret name" in err
