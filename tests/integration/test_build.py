"""build.py against a real Docker Engine: a real PyPI install through the extra CA, labels, tags, marker."""

import json

import docker
import pytest

from prebake_testing.buildpy import FORK_SOURCE_URL, TINY_ARGS, run_build_py

pytestmark = pytest.mark.docker


def _run(client, image: str, *command: str, **kwargs) -> str:
    return client.containers.run(image, entrypoint=list(command), remove=True, network_disabled=True,
                                 **kwargs).decode()


def test_progress_and_summary(tiny):
    assert "[stack]" in tiny["stderr"] or "already built" in tiny["stderr"]
    assert "[tiny] step 1/" in tiny["stderr"] and "s) COPY entrypoint/" in tiny["stderr"]
    assert tiny["image"].startswith("sha256:")
    assert tiny["tags"] == ["prebake-test:tiny-cu13.0-itest01", "prebake-test:tiny-cu13.0", "prebake-test:tiny"]
    assert tiny["size"].endswith("bytes)")


def test_tags_point_at_the_built_image(client, tiny):
    for tag in tiny["tags"]:
        assert client.images.get(tag).id == tiny["image"]


def test_labels(client, tiny):
    labels = client.images.get(tiny["image"]).labels
    assert labels["org.opencontainers.image.revision"] == "itest01"
    assert labels["org.opencontainers.image.version"] == "tiny-cu13.0-itest01"
    assert labels["org.opencontainers.image.source"] == FORK_SOURCE_URL  # PREBAKE_SOURCE_URL, as CI sets it
    assert labels["org.opencontainers.image.created"].endswith("Z")
    assert labels["io.prebake.variant"] == "tiny"
    assert labels["io.prebake.cuda.version"] == "13.0"
    assert labels["io.prebake.stack"] == tiny["stack"]


def test_marker(client, tiny):
    marker = json.loads(_run(client, tiny["image"], "cat", "/opt/.image_prebaked"))
    assert marker["variant"] == "tiny"
    assert marker["revision"] == "itest01"
    assert marker["cuda"] == "13.0" and marker["cuda_arch"] == "8.6"
    assert marker["cuda_compat_dir"] is None  # built --without cuda-compat
    assert marker["launch_defaults"] == {"VL_FLASHINFER": "off", "VL_MODEL": "ornith", "VL_PORT": "8080"}
    assert marker["base_image"].startswith("prebake-test-base:bookworm@sha256:")
    assert marker["stack_image"] == tiny["stack"]
    assert marker["python"].startswith("3.11")


def test_the_package_from_pypi_is_really_installed(client, tiny):
    version = _run(client, tiny["image"], "/opt/venv/bin/python", "-c",
                   "import huggingface_hub; print(huggingface_hub.__version__)")
    assert version.strip() == "1.33.0"


def test_host_family_files(client, tiny):
    assert _run(client, tiny["image"], "cat", "/etc/nccl.conf") == "NCCL_P2P_DISABLE=1\nNCCL_IB_DISABLE=1\n"
    env = client.images.get(tiny["image"]).attrs["Config"]["Env"]
    assert "TORCH_CUDA_ARCH_LIST=8.6" in env


def test_extra_ca_is_trusted_in_the_image(client, tiny, extra_ca):
    bundle = _run(client, tiny["image"], "cat", "/etc/ssl/certs/ca-certificates.crt")
    first_cert = extra_ca.read_text().split("-----END CERTIFICATE-----")[0].splitlines()[-1]
    assert first_cert in bundle


def test_entrypoint_is_tini_then_the_launcher(client, tiny):
    config = client.images.get(tiny["image"]).attrs["Config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "-s", "--", "/opt/venv/bin/python", "/opt/prebake/entrypoint/launch.py"]


def test_a_failing_step_is_reported_and_nothing_is_tagged(client, test_base, images_dir):
    common = images_dir / "common.toml"
    common.write_text(common.read_text().replace('"tini",', '"tini", "no-such-package-prebake",'))
    result = run_build_py("--variant", "tiny", "--images-dir", str(images_dir), "--base", test_base,
                          "--without", "cuda-compat", "--revision", "broken1")
    assert result.returncode == 1
    assert "error: the stack build failed at step" in result.stderr
    assert "apt-get install" in result.stderr
    assert "Unable to locate package no-such-package-prebake" in result.stderr
    assert "Traceback" not in result.stderr
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get("prebake-test:tiny-cu13.0-broken1")


def test_a_failing_self_test_leaves_no_tag(client, test_base, images_dir):
    # A lock that pins a version the installer never installs: the build succeeds, the self-test must not.
    lock = images_dir / "locks" / "test-py311.txt"
    tiny = images_dir / "tiny.toml"
    tiny.write_text(tiny.read_text().replace('cuda_arch = "8.6"', 'cuda_arch = "8.6"\n\n[stack]\nlock = "locks/lie.txt"'))
    (images_dir / "locks" / "lie.txt").write_text(
        lock.read_text() + "\n# not installed: the self-test's pins check must see it\nprebake-never-installed==1.0\n")
    result = run_build_py("--variant", "tiny", "--images-dir", str(images_dir), "--base", test_base,
                          "--without", "cuda-compat", "--revision", "lying1")
    # uv refuses a hash-less requirement in --require-hashes mode, so the stack fails first: also no tag.
    assert result.returncode == 1
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get("prebake-test:tiny-cu13.0-lying1")


def test_stack_image_from_elsewhere_is_used_only_if_it_is_this_variants_stack(client, tiny, test_base, extra_ca):
    common = ["--images-dir", TINY_ARGS[1], "--base", test_base, "--without", "cuda-compat",
              "--extra-ca", str(extra_ca), "--revision", "given01"]
    ok = run_build_py("--variant", "tinyada", "--stack-image", tiny["stack"], *common)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "[stack]" not in ok.stderr  # nothing built for the stack
    wrong = run_build_py("--variant", "tinyada", "--stack-image", test_base, *common)
    assert wrong.returncode == 1
    assert f"--stack-image {test_base} was built as something else" in wrong.stderr


# .invalid never resolves (RFC 2606): the pull fails on DNS, as it does on a machine without registry access.
UNPULLABLE = "registry.invalid/prebake/base@sha256:" + "0" * 64


def test_a_base_that_cannot_be_pulled_is_one_line_naming_the_way_out(client, images_dir):
    result = run_build_py("--variant", "tiny", "--images-dir", str(images_dir), "--base", UNPULLABLE,
                          "--without", "cuda-compat", "--revision", "nopull1")
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert line == result.stderr.strip().splitlines()[-1]  # the last line, alone: no Docker output after it
    assert line.startswith(f"error: cannot pull the base image {UNPULLABLE} (") and "registry.invalid" in line
    assert 'README, "Without registry access"' in line and "`./build.py local-base`" in line
    assert ("`./build.py --images-dir images/offline --variant tiny --base prebake-local-base:bookworm "
            "--without cuda-compat`") in line
    assert "step 1/" not in result.stderr and "Traceback" not in result.stderr
