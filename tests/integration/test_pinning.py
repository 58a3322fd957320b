"""pin-bases against a real local registry: the digest in the TOML becomes the one the registry serves."""

import re

import pytest

from prebake_testing.buildpy import run_build_py

pytestmark = pytest.mark.docker


def test_pin_bases_rewrites_the_digest(client, registry, test_base, images_dir):
    name = f"{registry.address}/prebake-base:bookworm"
    client.images.get(test_base).tag(f"{registry.address}/prebake-base", "bookworm")
    for chunk in client.api.push(f"{registry.address}/prebake-base", tag="bookworm", stream=True, decode=True):
        assert "error" not in chunk, chunk
    common = images_dir / "common.toml"
    stale = "sha256:" + "0" * 64
    common.write_text(re.sub(r'base = "[^"]+"', f'base = "{name}@{stale}"', common.read_text()))
    result = run_build_py("pin-bases", "--images-dir", str(images_dir))
    assert result.returncode == 0, result.stderr
    pinned = re.search(r'base = "([^"]+)"', common.read_text())[1]
    served = client.images.get_registry_data(name).id
    assert pinned == f"{name}@{served}" and served != stale
    assert f"{name} {stale[:19]} -> {served[:19]}" in result.stdout


def test_pin_bases_without_a_registry_is_a_clear_error(images_dir):
    common = images_dir / "common.toml"
    common.write_text(re.sub(r'base = "[^"@]+@', 'base = "127.0.0.1:9/nothing:here@', common.read_text()))
    before = common.read_text()
    result = run_build_py("pin-bases", "--images-dir", str(images_dir))
    assert result.returncode == 1 and "cannot ask the registry for 127.0.0.1:9/nothing:here" in result.stderr
    assert common.read_text() == before  # nothing half-written
