"""Pushing to a real (local) registry: versioned tags first, moving tags after; refusals leave nothing moved."""

import os

import docker
import pytest

from prebake_testing.buildpy import TINY_ARGS, run_build_py

pytestmark = pytest.mark.docker


def _build(registry_address: str, revision: str, extra_env: dict | None = None, extra_ca=None):
    env = {**os.environ, **(extra_env or {})}
    args = ["--variant", "tiny", *TINY_ARGS, "--registry", registry_address, "--revision", revision, "--push"]
    if extra_ca:
        args += ["--extra-ca", str(extra_ca)]
    return run_build_py(*args, env=env)


def test_push_sends_versioned_then_moving_tags(registry, tiny, extra_ca):
    result = _build(registry.address, "push01", extra_ca=extra_ca)
    assert result.returncode == 0, result.stderr[-3000:]
    assert registry.tags("prebake-test") == ["tiny", "tiny-cu13.0", "tiny-cu13.0-push01"]
    pushes = [line for line in result.stderr.splitlines() if line.startswith("[push]")]
    assert pushes[0].endswith(":tiny-cu13.0-push01")  # the versioned tag goes first
    assert pushes[-1].endswith(":tiny")
    assert "(pushed, sha256:" in result.stdout


def test_a_refused_push_moves_no_tag(client, readonly_registry, tiny, extra_ca):
    moving = f"{readonly_registry.address}/prebake-test:tiny"
    result = _build(readonly_registry.address, "refused01", extra_ca=extra_ca)
    assert result.returncode == 1
    assert f"the registry refused {readonly_registry.address}/prebake-test:tiny-cu13.0-refused01" in result.stderr
    assert "Traceback" not in result.stderr
    assert readonly_registry.tags("prebake-test") == []
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(moving)  # the short tag was not moved locally either


def test_credentials_never_reach_the_image(client, registry, tiny, extra_ca):
    secret = "prebake-test-password-5b1f"
    result = _build(registry.address, "creds01", {"PREBAKE_REGISTRY_USER": "ci", "PREBAKE_REGISTRY_PASSWORD": secret},
                    extra_ca=extra_ca)
    assert result.returncode == 0, result.stderr[-3000:]
    assert secret not in result.stdout + result.stderr
    image = client.images.get(f"{registry.address}/prebake-test:tiny-cu13.0-creds01")
    assert secret not in str(image.attrs)
    assert secret not in str(image.history())


def test_push_refuses_a_modified_checkout_without_revision(tmp_path):
    # Versioned tags must name a real revision: a build of uncommitted changes is refused before building.
    result = run_build_py("--variant", "tiny", *TINY_ARGS, "--registry", "127.0.0.1:1", "--push",
                          env={**os.environ, "GIT_DIR": str(tmp_path / "no-such-git")})
    assert result.returncode == 1 and "refusing to push" in result.stderr


def test_stack_command_pushes_the_stack_and_prints_it_by_digest(registry, tiny, extra_ca, tmp_path):
    output = tmp_path / "github_output"
    env = {**os.environ, "GITHUB_OUTPUT": str(output)}
    result = run_build_py("stack", "--variant", "tiny", *TINY_ARGS, "--extra-ca", str(extra_ca),
                          "--registry", registry.address, "--push", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith(f"stack-image={registry.address}/prebake-stack@sha256:")
    assert output.read_text() == line + "\n"
    key = tiny["stack"].partition(":")[2]
    assert registry.tags("prebake-stack") == [key]
