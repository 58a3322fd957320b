"""Layer order: an entrypoint-only change rebuilds only the entrypoint's layers and those after it."""

import shutil
from pathlib import Path

import pytest

from prebake_testing import REPO
from prebake_testing.buildpy import FIXTURE_IMAGES, parse_build_output, run_build_py

pytestmark = pytest.mark.docker


def _copy_repo(target: Path) -> Path:
    # .venv: the test command's virtual environment (hundreds of MB), not part of what a build reads
    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache"))
    return target


def _layers_before_entrypoint(client, image_id: str) -> list[str]:
    history = list(reversed(client.images.get(image_id).history()))  # oldest first
    layers = []
    for entry in history:
        if "COPY dir:" in entry["CreatedBy"] and "/opt/prebake/entrypoint/" in entry["CreatedBy"]:
            return layers
        layers.append(entry["Id"])
    raise AssertionError("no entrypoint COPY in the image history")


def test_entrypoint_change_reuses_every_earlier_layer(client, tiny, extra_ca, tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    launch = repo / "entrypoint" / "launch.py"
    launch.write_text(launch.read_text() + "\n# an entrypoint-only change\n")
    result = run_build_py("--variant", "tiny", "--images-dir", str(FIXTURE_IMAGES), "--base", "prebake-test-base:bookworm",
                          "--without", "cuda-compat", "--extra-ca", str(extra_ca), "--revision", "itest02", cwd=repo)
    assert result.returncode == 0, result.stderr[-3000:]
    rebuilt = parse_build_output(result.stdout)
    assert "is already built" in result.stderr  # the stack is not rebuilt at all
    assert rebuilt["image"] != tiny["image"]
    before = _layers_before_entrypoint(client, tiny["image"])
    after = _layers_before_entrypoint(client, rebuilt["image"])
    assert before and before == after
