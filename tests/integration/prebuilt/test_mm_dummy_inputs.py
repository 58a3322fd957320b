"""mm-dummy-inputs in the real a40 image: vLLM's multimodal profile of every multimodal catalogue model passes with
the locked transformers, and fails as every pod's start did (issue 55) when transformers refuses the placeholder
prompt without its images: transformers 5.23.0's own check backported into the image's transformers (no network),
and transformers 5.24.0 itself first on PYTHONPATH where its wheels are on disk (PREBAKE_TEST_TRANSFORMERS_WHEELS)."""

import os
from pathlib import Path

import pytest

from prebake_testing import REPO
from prebake_testing.selftest_runs import SITE, failed_alone, results_of, spec_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NAME = "mm-dummy-inputs"
A40_IMAGES_DIR = REPO / "images" / "offline"
PLACEHOLDER_REFUSED = "Found 1 <|image_pad|> tokens in the text but no images were passed"
# What transformers 5.23.0 added to ProcessorMixin.validate_inputs (processing_utils.py), put into the image's
# transformers after the check it already has; `text` may still be one string there.
BACKPORT = r'''
import re
path = "{site}/transformers/processing_utils.py"
source = open(path).read()
anchor = 'raise ValueError(f"You need to provide at least one input to call {{self.__class__.__name__}}")\n'
assert source.count(anchor) == 1, "validate_inputs changed: update the backport"
check = (
    "        if text is not None and images is None and getattr(self, 'image_token', None) is not None:\n"
    "            found = sum(t.count(self.image_token) for t in ([text] if isinstance(text, str) else text))\n"
    "            if found:\n"
    "                raise ValueError(f'Found {{found}} {{self.image_token}} tokens in the text but no images were passed.')\n")
open(path, "w").write(source.replace(anchor, anchor + check))
'''
WHEELS = os.environ.get("PREBAKE_TEST_TRANSFORMERS_WHEELS")  # a folder: transformers-5.24.0 and tokenizers-0.23.3


def spec():
    return spec_of("a40", A40_IMAGES_DIR, checks=[NAME])


def test_every_multimodal_catalogue_model_passes_vllms_profile_with_the_locked_transformers(client, a40):
    status, results = results_of(client, a40, spec())
    detail = results[NAME]["detail"]
    assert status == 0 and results[NAME]["ok"], detail
    assert detail.startswith("4 multimodal models (dense ") and "on a40x1_580, transformers 5.14.1" in detail, detail
    assert all(f"{key} " in detail for key in ("ornith", "ornithfp8", "ornithnvfp4")), detail
    # the engine's own processor-only cache: the path that met transformers' refusal
    assert "Qwen3VLMultiModalProcessor with MultiModalProcessorOnlyCache: a dummy image of 16384 placeholder" in detail
    # a request's image, decoded by Pillow, then again from the API server's cache
    assert "a 64x64 PNG in a request, twice with MultiModalProcessorSenderCache: 66 prompt tokens each time" in detail
    assert "not checked: qwen38nvfp4 (the launcher refuses it on the NVIDIA A40" in detail
    assert detail.endswith("text-only: kimi, nemotron, qwen, reap"), detail


def test_it_fails_when_transformers_refuses_the_placeholder_prompt_without_images(client, a40, derive):
    image = derive(a40, f"/opt/venv/bin/python - <<'EOF'\n{BACKPORT.format(site=SITE)}\nEOF")
    detail = failed_alone(client, image, spec(), NAME)
    assert detail.startswith("4 of 4 multimodal models fail vLLM's dummy-input profile on a40x1_580"), detail
    assert "Failed to apply Qwen3VLProcessor on data={'text': '<|vision_start|><|image_pad|><|vision_end|>'}" in detail
    assert detail.count(PLACEHOLDER_REFUSED) == 4, detail


@pytest.mark.skipif(not WHEELS, reason="PREBAKE_TEST_TRANSFORMERS_WHEELS names no folder with the transformers "
                                        "5.24.0 and tokenizers 0.23.3 wheels (docs/selftest.md has the command)")
def test_it_fails_with_transformers_5_24_first_on_the_python_path(client, a40):
    wheels = sorted(Path(WHEELS).glob("*.whl"))
    assert {w.name.split("-")[0] for w in wheels} == {"transformers", "tokenizers"}, wheels
    unpack = "; ".join(f"/opt/venv/bin/python -m zipfile -e /wheels/{w.name} /opt/transformers-5.24" for w in wheels)
    container = client.containers.run(a40, entrypoint=["sh", "-euc", unpack], detach=True, network_disabled=True,
                                      volumes={str(Path(WHEELS).resolve()): {"bind": "/wheels", "mode": "ro"}})
    try:
        assert container.wait()["StatusCode"] == 0, container.logs().decode(errors="replace")
        image = container.commit(changes=["ENV PYTHONPATH=/opt/transformers-5.24"]).id
    finally:
        container.remove(force=True)
    try:
        detail = failed_alone(client, image, spec(), NAME)
        assert "with transformers 5.24.0" in detail and detail.count(PLACEHOLDER_REFUSED) == 4, detail
    finally:
        client.images.remove(image, force=True)
