"""The OCI source label: images/common.toml's source_url, or PREBAKE_SOURCE_URL (what CI sets to its own repo)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from prebake import source
from prebake.errors import PrebakeError
from prebake.render import render
from prebake.variants import DEFAULT_IMAGES_DIR, load_variants

ROOT = Path(__file__).resolve().parents[2]


def test_the_environment_overrides_the_rendered_default() -> None:
    assert source.from_env({}) is None and source.from_env({"PREBAKE_SOURCE_URL": ""}) is None
    fork = "https://github.com/a-fork/prebake"
    assert source.from_env({"PREBAKE_SOURCE_URL": fork}) == fork


@pytest.mark.parametrize("bad", ["github.com/a/b", "https://x y", 'https://x/"; RUN evil', "file:///etc", "ftp://x"])
def test_a_bad_url_is_refused_naming_the_variable(bad: str) -> None:
    with pytest.raises(PrebakeError, match="PREBAKE_SOURCE_URL="):
        source.from_env({"PREBAKE_SOURCE_URL": bad})


def test_the_label_is_a_build_argument_with_the_configured_default() -> None:
    for variant in load_variants().values():
        dockerfile = render(variant).variant
        assert f"ARG PREBAKE_SOURCE_URL={variant.source_url}\n" in dockerfile
        assert 'org.opencontainers.image.source="${PREBAKE_SOURCE_URL}"' in dockerfile


def test_a_bad_configured_url_names_the_file_and_key(tmp_path: Path) -> None:
    images = tmp_path / "images"
    shutil.copytree(DEFAULT_IMAGES_DIR, images)
    common = images / "common.toml"
    common.write_text(common.read_text().replace('source_url = "https://', 'source_url = "git@', 1))
    with pytest.raises(PrebakeError, match=r"common\.toml: key 'source_url'"):
        load_variants(images)


def test_ci_labels_images_with_its_own_repository() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "images.yml").read_text())
    assert workflow["env"]["PREBAKE_SOURCE_URL"] == "${{ github.server_url }}/${{ github.repository }}"
