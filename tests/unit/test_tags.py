"""Tags say what is inside; moving tags are separate from versioned ones."""

import pytest

from prebake.errors import PrebakeError
from prebake.lockfile import pinned_version, requirement_line
from prebake.tags import image_tags, repository, source_revision
from prebake.variants import get_variant


def test_versioned_and_moving_tags():
    tags = image_tags(repository("prebake", "ghcr.io/acme"), "a40", "0.27.1", "13.0", "0123456789ab")
    assert tags.refs(tags.versioned) == ["ghcr.io/acme/prebake:a40-vllm0.27.1-cu13.0-0123456789ab"]
    assert tags.refs(tags.moving) == ["ghcr.io/acme/prebake:a40-vllm0.27.1-cu13.0", "ghcr.io/acme/prebake:a40"]


def test_local_repository_and_no_vllm():
    tags = image_tags(repository("prebake-test", None), "tiny", None, "13.0", "abc")
    assert tags.refs(tags.versioned) == ["prebake-test:tiny-cu13.0-abc"]


def test_invalid_tag_is_refused():
    with pytest.raises(PrebakeError, match="not a valid image tag"):
        image_tags("prebake", "a40", "0.27.1", "13.0", "bad/revision")


def test_revision_override_and_git():
    assert source_revision("deadbeef").short == "deadbeef"
    revision = source_revision()
    assert revision.full != "unknown" and len(revision.short.split("-")[0]) == 12


def test_vllm_version_comes_from_the_lock():
    a40 = get_variant("a40")
    text = a40.stack.lock.read_text()
    assert pinned_version(text, "vllm") == "0.27.1"
    assert pinned_version(text, "torch") == "2.13.0"
    assert pinned_version(text, "humming-kernels") == "0.1.10"
    assert pinned_version(text, "nvidia-cuda-nvcc") == "13.0.88"


def test_installer_missing_or_mismatched_is_a_clear_error(tmp_path):
    lock = "uv==0.13.9 \\\n    --hash=sha256:aa\n"
    assert requirement_line(lock, "uv==0.13.9", tmp_path) == "uv==0.13.9 --hash=sha256:aa"
    with pytest.raises(PrebakeError, match="locks uv==0.13.9 but the stack's installer is uv==0.14.0"):
        requirement_line(lock, "uv==0.14.0", tmp_path)
    with pytest.raises(PrebakeError, match="is not in the lock"):
        requirement_line("", "uv==0.13.9", tmp_path)
