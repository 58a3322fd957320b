"""The stack's Python set in layers: a bump of a package of the last layer ("rest", where vLLM goes)
rebuilds only that layer; the layers below it are the same layers, by content digest."""

import re
import shutil

import pytest

from prebake_testing.buildpy import FIXTURE_IMAGES, TEST_BASE, run_build_py

pytestmark = pytest.mark.docker

# tqdm is in the tiny stack's "rest" layer; 4.67.1 is a real release (hashes from PyPI), with no
# dependency on Linux, so the lock stays coherent.
TQDM_4671 = ("tqdm==4.67.1 \\\n"
             "    --hash=sha256:26445eca388f82e72884e0d580d5464cd801a3ea01e63e5601bdff9ba6a48de2 \\\n"
             "    --hash=sha256:f8aef9c52c08c13a65f30ea34f4e5aac3fd1a34959879d7e59e63027286627f2\n")


def _stack(extra_ca, images_dir) -> str:
    result = run_build_py("stack", "--variant", "tiny", "--images-dir", str(images_dir), "--base", TEST_BASE,
                          "--without", "cuda-compat", "--extra-ca", str(extra_ca))
    assert result.returncode == 0, result.stderr[-3000:]
    return re.search(r"prebake-stack:[0-9a-f]{16}", result.stdout + result.stderr)[0], result.stderr


def test_a_bump_in_the_last_layer_reuses_every_earlier_layer(client, test_base, extra_ca, tmp_path):
    before, _ = _stack(extra_ca, FIXTURE_IMAGES)
    images = tmp_path / "images"
    shutil.copytree(FIXTURE_IMAGES, images)
    lock = images / "locks" / "test-py311.txt"
    text = lock.read_text()
    bumped = re.sub(r"^tqdm==4\.70\.1 \\\n(    --hash=\S+ \\\n)*    --hash=\S+\n", TQDM_4671, text, flags=re.MULTILINE)
    assert bumped != text
    lock.write_text(bumped)

    after, _ = _stack(extra_ca, images)
    assert after != before  # another lock, another stack address
    old = client.images.get(before).attrs["RootFS"]["Layers"]
    new = client.images.get(after).attrs["RootFS"]["Layers"]
    shared = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
    # Only the last three layers differ: the rest layer's requirements file, its install, and the
    # dependency check after it. Every earlier layer (base, OS packages, venv, installer, the
    # "tools" and "native" layers) is the same layer by content digest: a registry has it already.
    assert len(new) == len(old) and shared == len(new) - 3
    history = [entry["CreatedBy"] for entry in reversed(client.images.get(after).history())]
    assert [i for i, step in enumerate(history) if "requirements/3-rest.txt" in step]  # the rest layer exists
    installed = client.containers.run(after, entrypoint=["/opt/venv/bin/python", "-c",
                                                         "from importlib.metadata import version; print(version('tqdm'))"],
                                      remove=True).decode().strip()
    assert installed == "4.67.1"
    client.images.remove(after, force=True)
