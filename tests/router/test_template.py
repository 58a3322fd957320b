"""`./build.py runpod template --variant router`: the router pod's RunPod template, what it refuses, and that the
environment it holds is one the router pod starts with (routerpod/router.py's own checks, then nginx -t)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from routerpod import router

DIGEST = "ghcr.io/team/prebake-router@sha256:" + "ab" * 32
PODS = "https://abc123-8080.proxy.runpod.net, https://def456-8080.proxy.runpod.net"
BASE = ("runpod", "template", "--variant", "router", "--image-size-gb", "0.3")


def template(build_py, *extra: str):
    return build_py(*BASE, *extra)


def test_the_template_holds_the_routers_variables_and_no_gpu(build_py, tmp_path):
    done = template(build_py, "--image", DIGEST, "--api-key-secret", "router_key", "--env", f"PREBAKE_PODS={PODS}",
                    "--env", "PREBAKE_PODS_KEY={{ RUNPOD_SECRET_prebake_api_key }}")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["category"] == "CPU" and payload["ports"] == ["8080/http"]
    assert payload["mounts"]["persistent"]["size"] == 10 and "readme" not in payload  # v2: a 10 GB floor, no readme
    assert "ANTHROPIC_BASE_URL=https://<router pod id>-8080.proxy.runpod.net" in done.stderr
    assert payload["env"] == {"PREBAKE_PODS": PODS, "PREBAKE_PODS_KEY": "{{ RUNPOD_SECRET_prebake_api_key }}",
                              "VLLM_API_KEY": "{{ RUNPOD_SECRET_router_key }}", "VL_PORT": "8080"}
    assert "Compute Type:" in done.stderr and "CPU" in done.stderr and "driver" not in done.stderr.lower()
    # the pod starts with this environment (the secrets as RunPod fills them in): router.py checks it, nginx takes it
    env = {**os.environ, **payload["env"], "VLLM_API_KEY": "router-secret-value", "PREBAKE_PODS_KEY": "pods-secret-value",
           "PREBAKE_ROUTER_DIR": str(tmp_path), "PREBAKE_PODS_FILE": str(tmp_path / "none")}
    rendered = subprocess.run([sys.executable, router.__file__, "render"], env=env, capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    if shutil.which("nginx"):
        (tmp_path / "nginx.conf").write_text(rendered.stdout)
        check = subprocess.run(["nginx", "-t", "-q", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


@pytest.mark.needs_runpod_schema
def test_the_router_template_is_a_v2_create_template_request(build_py):
    from prebake_testing.runpod_api import violations

    done = template(build_py, "--image", DIGEST, "--api-key-secret", "router_key", "--env", f"PREBAKE_PODS={PODS}")
    assert done.returncode == 0, done.stderr
    assert violations(json.loads(done.stdout), "/components/schemas/CreateTemplateRequest") == []


@pytest.mark.parametrize("extra, says", [
    (("--image", "ghcr.io/team/prebake-router:latest", "--api-key-secret", "k", "--env", f"PREBAKE_PODS={PODS}"),
     "by digest"),
    (("--image", DIGEST, "--api-key-secret", "k"), "PREBAKE_PODS=... is missing"),
    (("--image", DIGEST, "--env", f"PREBAKE_PODS={PODS}"), "VLLM_API_KEY is not set"),
    (("--image", DIGEST, "--api-key-secret", "k", "--env", "PREBAKE_PODS=https://abc-8080.proxy.runpod.net/v1"),
     "base URL only"),
    (("--image", DIGEST, "--api-key-secret", "k", "--env", f"PREBAKE_PODS={PODS}", "--env", "VL_MODEL=qwen3"),
     "a variable of the launcher"),
    (("--image", DIGEST, "--api-key-secret", "k", "--env", f"PREBAKE_PODS={PODS}", "--env", "PREBAKE_PODS_KEY=a b"),
     "PREBAKE_PODS_KEY:"),
])
def test_what_the_router_pod_would_refuse_is_refused_now(build_py, extra, says):
    done = template(build_py, *extra)
    assert done.returncode != 0 and says in done.stderr and not done.stdout, done.stderr
