"""Every self-test check can fail: each condition is broken in an image derived from a built one.

The image-level checks run on the tiny test image (built by the `tiny` fixture). The toolchain
checks and the vLLM argv checks need the real a40 image: tests/integration/prebuilt/test_selftest_a40.py.
"""

import importlib.util
import sys

import pytest

from prebake_testing import REPO
from prebake_testing.selftest_runs import HUB_METADATA, SITE, failed_alone, results_of

pytestmark = pytest.mark.docker


# --- the tiny image: marker, pins, imports, dependencies ----------------------------------------

def test_the_tiny_image_passes_and_reports_the_vllm_checks_as_skipped(client, tiny, tiny_spec):
    status, results = results_of(client, tiny["image"], tiny_spec)
    assert status == 0, results
    assert list(results) == ["marker", "pins", "imports", "dependencies", "bridge", "vllm-facts", "vllm-args",
                             "vllm-knobs", "thinking-controls", "claude-code-sessions", "mm-dummy-inputs", "sleep-mode",
                             "flashinfer-aot", "modelinfos"]
    for name in ("vllm-facts", "vllm-args", "vllm-knobs", "claude-code-sessions", "mm-dummy-inputs", "sleep-mode",
                 "modelinfos"):
        assert results[name]["skipped"] and results[name]["detail"].startswith("skipped: the lock pins no vllm")
    # the plugin's install step ran in the tiny image too: only the requests need vLLM
    assert results["thinking-controls"]["detail"] == ("skipped: the prebake_thinking entry point is installed; "
                                                      "the lock pins no vllm to run the requests through")
    assert results["flashinfer-aot"]["detail"] == ("skipped: no flashinfer-python in the lock, and the variant lists "
                                                   "no FlashInfer module")
    assert not any(results[name]["skipped"] for name in ("marker", "pins", "imports", "dependencies", "bridge"))


def test_marker_fails_when_missing(client, tiny, tiny_spec, derive):
    image = derive(tiny["image"], "rm /opt/.image_prebaked")
    assert "/opt/.image_prebaked is missing" in failed_alone(client, image, tiny_spec, "marker")


def test_marker_fails_when_incomplete(client, tiny, tiny_spec, derive):
    image = derive(tiny["image"], "/opt/venv/bin/python -c \"import json; p='/opt/.image_prebaked'; "
                                  "m=json.load(open(p)); del m['revision']; m['created']='unknown'; "
                                  "json.dump(m, open(p, 'w'))\"")
    assert failed_alone(client, image, tiny_spec, "marker") == "/opt/.image_prebaked lacks revision, created"


def test_pins_fail_when_an_installed_version_differs_from_the_lock(client, tiny, tiny_spec, derive):
    image = derive(tiny["image"], f"sed -i 's/^Version: 1.33.0$/Version: 1.32.0/' {HUB_METADATA}")
    detail = failed_alone(client, image, tiny_spec, "pins")
    assert detail == "huggingface-hub 1.32.0 installed, lock pins 1.33.0"


def test_imports_fail_when_a_module_cannot_be_imported(client, tiny, tiny_spec, derive):
    image = derive(tiny["image"], f"sed -i '1i raise ImportError(\"broken on purpose\")' "
                                  f"{SITE}/huggingface_hub/__init__.py")
    detail = failed_alone(client, image, tiny_spec, "imports")
    assert detail == "huggingface_hub: ImportError: broken on purpose"


def test_dependencies_fail_when_a_requirement_is_missing(client, tiny, tiny_spec, derive):
    # Requires-Dist belongs to the METADATA header, right after Version.
    image = derive(tiny["image"], f"sed -i '/^Version: /a Requires-Dist: prebake-missing-dependency>=1' "
                                  f"{HUB_METADATA}")
    detail = failed_alone(client, image, tiny_spec, "dependencies")
    assert "prebake-missing-dependency" in detail


def test_the_size_benchmarks_trial_trim_refuses_to_run_outside_a_prebake_image(client, test_base):
    # TRIM_SCRIPT deletes system files: its guard must stop it anywhere but in a prebake image.
    spec = importlib.util.spec_from_file_location("image_size", REPO / "benchmarks" / "image_size.py")
    image_size = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = image_size  # its dataclasses look their module up there
    spec.loader.exec_module(image_size)

    container = client.containers.run(test_base, entrypoint=["sh", "-euc", image_size.TRIM_SCRIPT], detach=True,
                                      network_disabled=True)
    try:
        assert container.wait()["StatusCode"] == 2
        assert "not a prebake image: no trim" in container.logs().decode()
        listing = container.diff() or []
        assert not [change for change in listing if change["Kind"] == 2]  # nothing deleted
    finally:
        container.remove(force=True)
