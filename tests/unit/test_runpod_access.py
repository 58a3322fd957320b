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
    status, out, readme = template(capsys, "--api-key-secret", "prebake_api_key")  # the readme: on stderr (v2 has no field)
    assert status == 0
    payload = json.loads(out)
    assert payload["env"]["VLLM_API_KEY"] == "{{ RUNPOD_SECRET_prebake_api_key }}"
    # no bare one-liner: without the model and context settings Claude Code guesses the context (and 2.1.332 warns)
    assert "ANTHROPIC_BASE_URL=" not in readme and "/prebake/status.txt" in readme
    assert "open https://<pod id>-8080.proxy.runpod.net in a browser" in readme
    assert 'OpenAI(base_url="https://<pod id>-8080.proxy.runpod.net/v1", api_key="<key>")' in readme
    assert "x-api-key" in readme and "open to anyone" not in readme


def test_without_a_key_the_readme_says_the_endpoint_is_open(capsys):
    status, out, err = template(capsys)
    assert status == 0 and "VLLM_API_KEY" not in json.loads(out)["env"]
    assert "anyone with the pod's URL can use it" in err


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
    # VL_SWAP against the catalogue and the variant's GPUs (a40: Ampere), with the launcher's own checks
    (["VL_SWAP=ornith:nosuchmodel"], "VL_SWAP pair 'ornith:nosuchmodel' names no catalogue model"),
    (["VL_SWAP=x:ornith,y:ornith"], "leaves one model"),
    (["VL_SWAP=ornith:ornith,qwen38:qwen38nvfp4"], "VL_SWAP pair 'qwen38:qwen38nvfp4' cannot run on this host"),
    (["VL_SWAP=ornith:ornith,claude-ornith:dense"], "is also what clients send for 'ornith'"),
    (["VL_SWAP=ornith:ornith,qwen:qwen", "VL_SWAP_STOP=0.0000001"], "VL_SWAP_STOP"),
    (["VLLM_API_KEY= spaced "], "VLLM_API_KEY has whitespace around it"),
    (["VLLM_API_KEY=   "], "VLLM_API_KEY is only whitespace"),
    (["VL_CTX=8192", "VL_MODEL=ornith", "VL_CTX=16384"], "--env VL_CTX given more than once"),
])
def test_env_is_checked_as_the_launcher_checks_it_at_pod_start(capsys, env, needle):
    status, _, err = template(capsys, *[arg for pair in env for arg in ("--env", pair)])
    assert status == 1 and needle in err and "Traceback" not in err, err


def test_a_secret_name_is_checked(capsys):
    status, _, err = template(capsys, "--api-key-secret", "bad name }}")
    assert status == 2 and "secret name" in err


def test_a_swap_set_the_variants_gpus_run_is_accepted(capsys):
    status, out, err = template(capsys, "--env", "VL_SWAP=ornith:ornith,qwen:qwen")
    assert status == 0 and json.loads(out)["env"]["VL_SWAP"] == "ornith:ornith,qwen:qwen", err
