"""Loading and validation of images/*.toml: every error names the file and the key."""

from pathlib import Path

import pytest

from prebake.errors import PrebakeError
from prebake.variants import load_variants, get_variant


def test_the_real_variants_load_with_their_host_families():
    variants = load_variants()
    assert {"a40", "ada", "hopper", "blackwell"} <= set(variants)
    a40 = variants["a40"]
    assert a40.cuda_arch == "8.6"
    assert dict(a40.nccl) == {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    assert a40.launch_defaults["VL_FLASHINFER"] == "off"
    assert a40.launch_defaults["VL_MODEL"] == "ornith"
    assert "@sha256:" in a40.stack.base and a40.stack.cuda_compat
    assert variants["hopper"].cuda_arch == "9.0" and variants["blackwell"].cuda_arch == "12.0"


def test_shared_values_are_written_once(tmp_path):
    # Every production variant takes its stack from common.toml, none repeats it.
    for variant in load_variants().values():
        assert variant.stack_source.name == "common.toml"
        assert "[stack]" not in variant.path.read_text()


def test_the_offline_folder_holds_the_same_variants():
    assert set(load_variants(Path("images/offline"))) == set(load_variants())


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _prepend(path: Path, text: str) -> None:
    path.write_text(text + path.read_text())


@pytest.mark.parametrize("file, addition, expected", [
    ("tiny.toml", '^colour = "red"\n', "tiny.toml: unknown key 'colour'"),
    ("tiny.toml", '[host.nccl2]\nX = 1\n', "unknown key 'host.nccl2'"),
    ("common.toml", '^flavour = 1\n', "common.toml: unknown key 'flavour'"),
    ("tiny.toml", '[stack]\npython_version = 3.11\n', "key 'stack.python_version' must be the base image's Python"),
    ("tiny.toml", '[stack]\nbase = "debian:bookworm"\n', "key 'stack.base' must be pinned by digest"),
    ("tiny.toml", 'MODEL = "x"\n', "key 'launch.MODEL' is not a VL_* variable"),
])
def test_bad_keys_and_types_name_file_and_key(images_dir, file, addition, expected):
    if addition.startswith("^"):
        _prepend(images_dir / file, addition[1:])
    else:
        _append(images_dir / file, addition)
    with pytest.raises(PrebakeError, match=expected.replace("[", r"\[").replace("*", r"\*").replace(".", r"\.")):
        load_variants(images_dir)


def test_wrong_type_says_what_is_expected(images_dir):
    path = images_dir / "tiny.toml"
    path.write_text(path.read_text().replace('cuda_arch = "8.6"', "cuda_arch = 8.6"))
    with pytest.raises(PrebakeError) as error:
        load_variants(images_dir)
    assert "tiny.toml: key 'cuda_arch' must be the GPUs' compute capability, like '8.6', not a float" in str(error.value)


def test_missing_field(images_dir):
    path = images_dir / "tiny.toml"
    path.write_text(path.read_text().replace('gpus = ["NVIDIA A40"]\n', ""))
    with pytest.raises(PrebakeError, match=r"tiny.toml: missing key 'gpus'"):
        load_variants(images_dir)


def test_missing_stack_field_in_common(images_dir):
    path = images_dir / "common.toml"
    path.write_text(path.read_text().replace('cuda = "13.0"\n', ""))
    with pytest.raises(PrebakeError, match=r"common.toml: missing key 'stack.cuda'"):
        load_variants(images_dir)


def test_malformed_file(images_dir):
    (images_dir / "broken.toml").write_text('description = "unterminated\n')
    with pytest.raises(PrebakeError, match=r"broken.toml: not valid TOML"):
        load_variants(images_dir)


def test_unknown_variant_lists_known_ones(images_dir):
    with pytest.raises(PrebakeError, match=r"unknown variant 'nope'; known variants: tiny"):
        get_variant("nope", images_dir)


def test_variant_stack_override_is_merged_over_common(images_dir):
    _append(images_dir / "tiny.toml", '[stack]\ncuda_compat = false\n')
    tiny = get_variant("tiny", images_dir)
    assert tiny.stack.cuda_compat is False
    assert tiny.stack.python_version == "3.11"  # the rest still from common.toml
    assert tiny.stack_source.name == "tiny.toml"
