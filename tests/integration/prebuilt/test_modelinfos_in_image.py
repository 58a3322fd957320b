"""vLLM's model-info cache baked into the real a40 image: present for every architecture the build bakes, and,
copied by the launcher's own module into an empty VLLM_CACHE_ROOT, what vLLM's registry answers from without
its subprocess (vLLM's own debug log says which: "Loaded model info ... from cache" or "... miss"). Without the
copy, the same registry runs its subprocess: the evidence the test reads is there to fail."""

from __future__ import annotations

import json

import pytest

from prebake.modelinfos import architectures
from prebake_testing import REPO

pytestmark = pytest.mark.slow
PROBE = REPO / "benchmarks" / "modelinfo_probe.py"


def probe(client, image: str, mode: str, archs: list[str]) -> dict:
    container = client.containers.run(image, ["/probe.py", mode, *archs], entrypoint="python", detach=True,
                                      network_disabled=True, environment={"PYTHONPATH": "/opt/prebake"},
                                      volumes={str(PROBE): {"bind": "/probe.py", "mode": "ro"}})
    try:
        assert container.wait(timeout=900)["StatusCode"] == 0, container.logs().decode(errors="replace")[-3000:]
        return json.loads(container.logs(stderr=False).decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)


def test_the_registry_reads_the_baked_files_after_the_launchers_copy(client, a40):
    archs = list(architectures())
    copied = probe(client, a40, "copied", archs)
    assert copied["rc"] == 0, copied.get("log_tail")
    assert copied["copy_failed"] is None and copied["decision"].startswith(f"{len(archs)} copied to ")
    for arch in archs:
        assert copied["architectures"][arch] == {**copied["architectures"][arch], "from_cache": True,
                                                 "subprocess": False}, arch


def test_without_the_copy_the_registry_runs_its_subprocess(client, a40):
    empty = probe(client, a40, "empty", ["Qwen3ForCausalLM"])
    assert empty["rc"] == 0, empty.get("log_tail")
    assert empty["architectures"]["Qwen3ForCausalLM"]["subprocess"]
    assert not empty["architectures"]["Qwen3ForCausalLM"]["from_cache"]


def test_the_selftest_check_passes_on_the_image_and_fails_when_vllm_changed_after_the_bake(client, a40, derive):
    from prebake_testing.selftest_runs import failed_alone, results_of, spec_of
    spec = spec_of("a40", REPO / "images" / "offline", checks=["modelinfos"])
    status, results = results_of(client, a40, spec)
    assert status == 0, results
    assert results["modelinfos"]["detail"].startswith(f"{len(architectures())} architectures baked")
    # vLLM's qwen3 module edited after the bake: its file would be stale, the subprocess back on every pod
    edited = derive(a40, "f=$(/opt/venv/bin/python -c 'import importlib.util as u; "
                         "print(u.find_spec(\"vllm\").submodule_search_locations[0])')/model_executor/models/qwen3.py; "
                         "echo '# edited' >> \"$f\"")
    detail = failed_alone(client, edited, spec, "modelinfos")
    assert "Qwen3ForCausalLM: baked for hash" in detail and "vLLM changed after the bake" in detail
