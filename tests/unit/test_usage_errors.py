"""Every bad input through the real command line: a usage message and exit 2 for a bad option value, one
`error:` line and exit 1 for the rest, never a traceback, and always before anything slow.

"Before anything slow" is checked by pointing DOCKER_HOST at nothing: a check that ran after the Docker
Engine was needed would report the missing engine instead of the bad input.
"""

from __future__ import annotations

import os

import pytest

from prebake import runpod
from prebake.errors import PrebakeError
from prebake.references import reference_problem, registry_problem
from prebake.tags import revision_problem, source_revision
from prebake_testing.buildpy import FIXTURE_IMAGES, run_build_py

NO_DOCKER = {**{k: v for k, v in os.environ.items() if not k.startswith(("PREBAKE_", "RUNPOD_"))},
             "DOCKER_HOST": "unix:///nonexistent/prebake-test.sock"}
TINY = ("--variant", "tiny", "--images-dir", str(FIXTURE_IMAGES), "--without", "cuda-compat")
IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234"


def run(*args: str, env: dict | None = None):
    return run_build_py(*args, env={**NO_DOCKER, **(env or {})})


def assert_usage_error(result, *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Usage: build.py" in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert "cannot reach a Docker daemon" not in result.stderr


def assert_error(result, *needles: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.startswith("error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert "cannot reach a Docker daemon" not in result.stderr


@pytest.mark.parametrize("args, needle", [
    (("--bogus",), "No such option: --bogus"),
    (("--variant",), "'--variant' requires an argument"),
    (("build",), "Missing option '--variant'"),
    (("nonsense-command",), "No such command"),
    (("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "-1"), "--image-size-gb"),
    (("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "inf"), "positive number"),
    (("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "nan"), "positive number"),
    (("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "1e300"), "more than 100000 GB"),
    (("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--name", "a\nb"),
     "'--name'"),
    (("runpod", "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--base-url", "not a url"),
     "--base-url"),
    (("runpod", "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--base-url",
      "file:///etc"), "not an http(s) URL"),
    (("runpod", "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--base-url",
      "http://api.runpod.io/v2"), "plain http"),
    (("runpod", "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--base-url",
      "https://rest.runpod.io/v1"), "RunPod's REST API v1 is retired"),
    (("runpod", "template", "--variant", "a40", "--image", "Foo Bar:x", "--image-size-gb", "8"), "'--image'"),
    # RunPod v2's floor for a pod volume (PersistentMount.size >= 10)
    (("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--volume-gb", "9"),
     "'--volume-gb'"),
    (("runpod", "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", "--template-id", "../pods"),
     "not a RunPod id"),
])
def test_usage_errors_print_usage_and_exit_2(args, needle) -> None:
    assert_usage_error(run(*args), needle)


@pytest.mark.parametrize("args, needle", [
    (("--registry", "ghcr.io/MyOrg"), "'MyOrg' has upper-case letters"),
    (("--registry", "Foo Bar"), "no white space"),
    (("--base", "Foo Bar"), "'--base'"),
    (("--stack-image", "Foo:Bar"), "'Foo' has upper-case letters"),
    (("--revision", "bad rev/x"), "'--revision'"),
    (("--revision", "dirty"), "'--revision'"),
])
def test_malformed_references_and_revisions_are_refused_before_the_build(args, needle) -> None:
    assert_usage_error(run(*TINY, *args), needle)


def test_local_base_refuses_a_malformed_tag_before_debootstrap() -> None:
    assert_usage_error(run("local-base", "--tag", "A B:c"), "'--tag'")


def test_a_registry_from_the_environment_is_checked_too() -> None:
    assert_usage_error(run(*TINY, env={"PREBAKE_REGISTRY": "ghcr.io/MyOrg"}), "--registry", "ghcr.io/MyOrg")


@pytest.mark.parametrize("variable", ["PREBAKE_REGISTRY_USER", "PREBAKE_REGISTRY_PASSWORD"])
def test_half_a_credentials_pair_is_refused_before_the_build(variable) -> None:
    result = run(*TINY, "--registry", "127.0.0.1:5000", "--push", "--revision", "abc1234", env={variable: "x"})
    assert_error(result, "set both, or neither")


def test_build_args_that_prebake_sets_are_refused() -> None:
    assert_error(run(*TINY, "--build-arg", "STACK_IMAGE=x"), "prebake sets STACK_IMAGE itself")
    assert_error(run(*TINY, "--base", "a:b", "--build-arg", "BASE_IMAGE=c:d"), "disagree")
    assert_error(run(*TINY, "--build-arg", "BASE_IMAGE=Foo Bar"), "BASE_IMAGE='Foo Bar'")
    assert_error(run(*TINY, "--build-arg", "PREBAKE_SOURCE_URL=https://x/y"), "set PREBAKE_SOURCE_URL in the environment")


def test_a_bad_source_url_is_refused_before_the_build() -> None:
    assert_error(run(*TINY, env={"PREBAKE_SOURCE_URL": "not a url"}), "PREBAKE_SOURCE_URL='not a url'")


def test_an_unreadable_extra_ca_is_refused_before_the_docker_engine_is_asked(tmp_path) -> None:
    assert_error(run(*TINY, "--extra-ca", str(tmp_path)), f"--extra-ca {tmp_path}: cannot read it")
    assert_error(run(*TINY, "--extra-ca", str(tmp_path / "none.pem")), "No such file")


def test_a_push_timeout_that_is_not_a_number_is_refused_before_the_build() -> None:
    result = run(*TINY, "--registry", "127.0.0.1:5000", "--push", "--revision", "abc1234",
                 env={"PREBAKE_PUSH_TIMEOUT_S": "soon"})
    assert_error(result, "PREBAKE_PUSH_TIMEOUT_S='soon'")


def test_a_variant_file_that_is_not_utf8_names_the_file(images_dir) -> None:
    (images_dir / "latin.toml").write_bytes(b'description = "caf\xe9"\n')
    assert_error(run("list", "--images-dir", str(images_dir)), f"{images_dir / 'latin.toml'}: not UTF-8")


def test_a_folder_named_like_a_variant_file_names_the_folder(images_dir) -> None:
    (images_dir / "x.toml").mkdir()
    assert_error(run("list", "--images-dir", str(images_dir)), f"{images_dir / 'x.toml'}: is a folder")


def test_render_out_dir_that_is_a_file(tmp_path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    assert_usage_error(run("render", "--out-dir", str(target)), "is a file, not a folder")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a40").write_text("")  # where a folder must go
    assert_error(run("render", "--variant", "a40", "--out-dir", str(tmp_path / "out")), "cannot write")


@pytest.mark.parametrize("env, needle", [
    (["VL_CTX=abc"], "VL_CTX='abc' is not valid"),
    (["VL_PORT=99999"], "VL_PORT='99999' is not valid"),
    (["VL_MODEL=../evil"], "VL_MODEL='../evil' is not valid"),
    (["VL_CTXX=8192"], "did you mean VL_CTX?"),
])
def test_template_refuses_what_the_launcher_would_refuse(env, needle) -> None:
    args = ["runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8"]
    for item in env:
        args += ["--env", item]
    assert_error(run(*args), needle)


def test_template_takes_good_launcher_values_and_warns_of_retired_ones() -> None:
    result = run("runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8",
                 "--env", "VL_CTX=131072", "--env", "VL_LMCACHE=on", "--env", "OTHER=x")
    assert result.returncode == 0, result.stderr
    assert "warning: --env VL_LMCACHE: ignored by the launcher" in result.stderr


def test_a_revision_build_py_accepts_is_one_runpod_template_accepts() -> None:
    """`--revision release1` used to build a tag that `runpod template` refused: one pattern serves both."""
    for revision in ("release1", "v1.2.3", "0123456789ab", "build_42", "f" * 40 + ".2"):
        assert revision_problem(revision) is None
        tag = f"ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-{source_revision(revision).short}"
        runpod.check_image_ref(tag, "a40")
    assert source_revision("f" * 40).short == "f" * 12  # a full git hash is shortened, any other revision is whole
    assert source_revision("release20250101").short == "release20250101"
    for revision in ("bad rev", "a/b", "x-y", "dirty", "latest", "", "a" * 65):
        assert revision_problem(revision) is not None
    with pytest.raises(PrebakeError, match="not a versioned tag"):
        runpod.check_image_ref("ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-latest", "a40")


@pytest.mark.parametrize("ref", ["ubuntu", "ubuntu:24.04", "localhost:5000/a/b:c", "127.0.0.1:5000/prebake-test:x",
                                 "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234",
                                 "nvidia/cuda:13.0.2-base-ubuntu24.04@sha256:" + "a" * 64, "MyHost.io/x/y",
                                 "a__b/c-d.e_f"])
def test_references_docker_accepts(ref) -> None:
    assert reference_problem(ref) is None


@pytest.mark.parametrize("ref", ["", "Foo Bar", "Foo:Bar", "ghcr.io/MyOrg/x", "x:", "x:-bad", "x@sha256:zz",
                                 "a//b", "-a/b", "a/b_", "x:" + "t" * 129, "bad_host!/x"])
def test_references_docker_refuses(ref) -> None:
    assert reference_problem(ref) is not None


def test_registry_names() -> None:
    for good in ("ghcr.io/owner", "127.0.0.1:5000", "localhost:5000/team/sub", "docker.io/owner"):
        assert registry_problem(good) is None, good
    for bad in ("ghcr.io/MyOrg", "Foo Bar", "ghcr.io/owner/x:tag", "x@sha256:" + "a" * 64, ""):
        assert registry_problem(bad) is not None, bad
