"""The command line's errors: one clear message, a non-zero exit, nothing done."""

import json
import os

from prebake.variants import load_variants


def test_list_and_matrix(build_py):
    listing = build_py("list")
    assert listing.returncode == 0 and "a40" in listing.stdout and "sm_86" in listing.stdout
    matrix = json.loads(build_py("matrix").stdout)
    assert matrix == {"include": [{"variant": name} for name in load_variants()]}


def test_unknown_variant(build_py):
    result = build_py("--variant", "nope")
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: unknown variant 'nope'; known variants: a40, ada, blackwell, hopper "
                                     f"(each is a file in {os.getcwd()}/images)")


def test_no_docker_daemon(build_py):
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    result = build_py("--variant", "a40", env=env)
    assert result.returncode == 1
    assert "cannot reach a Docker daemon at unix:///nonexistent/docker.sock" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_a_step_the_variant_does_not_have(build_py):
    result = build_py("--variant", "a40", "--without", "flux-capacitor")
    assert result.returncode == 1 and "no such optional step; optional steps: cuda-compat" in result.stderr


def test_push_needs_a_registry(build_py):
    env = {k: v for k, v in os.environ.items() if k != "PREBAKE_REGISTRY"}
    result = build_py("--variant", "a40", "--push", env=env)
    assert result.returncode == 1 and "--push needs a registry" in result.stderr


def test_extra_ca_must_be_pem(build_py, tmp_path):
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    result = build_py("--variant", "a40", "--extra-ca", str(bad))
    assert result.returncode == 1 and f"--extra-ca {bad}: not a PEM certificate" in result.stderr


def test_render_stdout_shows_both_files(build_py):
    result = build_py("render", "--variant", "a40", "--stdout", "--without", "cuda-compat")
    assert result.returncode == 0
    assert "### dockerfiles/a40/stack.Dockerfile" in result.stdout and "cuda-compat-13-0" not in result.stdout
