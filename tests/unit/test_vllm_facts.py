"""entrypoint/vllm_facts.json: as the generator writes it, what the launcher and the bridge read, and the sync
check's message (the generator and the check on a real image: tests/integration/prebuilt/test_selftest_a40.py)."""

import json

import pytest

from entrypoint import vllm_facts as facts_module
from entrypoint.launcher import cmdline, knobs
from entrypoint.serving import auth
from prebake import vllm_facts_file
from prebake.errors import PrebakeError
from prebake.incontainer import vllm_facts_probe
from prebake.incontainer.checks import vllm_facts_match as facts_check
from prebake.lockfile import pinned_versions
from prebake.variants import get_variant

COMMITTED = json.loads(vllm_facts_file.FILE.read_text())
FACTS = {k: v for k, v in COMMITTED.items() if k != "generated_by"}


def test_the_committed_file_is_as_the_generator_writes_it_for_the_locks_vllm():
    assert vllm_facts_file.FILE.read_text() == vllm_facts_file.render(FACTS)
    assert "./build.py vllm-facts" in COMMITTED["generated_by"]
    variant = get_variant("a40")
    lock = (variant.path.parent / variant.stack.lock).read_text()
    assert FACTS["vllm"] == pinned_versions(lock)["vllm"]


def test_the_launcher_and_the_bridge_read_their_vllm_facts_from_the_file():
    assert knobs.ATTENTION_BACKENDS == tuple(FACTS["attention_backends"])
    assert knobs.MOE_BACKENDS == tuple(FACTS["moe_backends"]) and "marlin" in knobs.MOE_BACKENDS
    assert knobs.LINEAR_BACKENDS == tuple(FACTS["linear_backends"])
    assert auth.INSIDE_ONLY == frozenset(FACTS["dev_endpoints"]) and "/collective_rpc" in auth.INSIDE_ONLY
    options = FACTS["serve_options"]
    assert cmdline.SWITCHES == {k for k, v in options.items() if v == 0} and "enable-prefix-caching" in cmdline.SWITCHES
    assert cmdline.ONE_VALUE == {k for k, v in options.items() if v == 1} and "max-model-len" in cmdline.ONE_VALUE
    assert cmdline.SEVERAL_VALUES == {"served-model-name", "numa-bind-nodes"} | {
        k for k, v in options.items() if v == "+"}
    assert "no-enable-prefix-caching" not in options  # under its positive name


def test_a_missing_or_incomplete_file_names_itself_and_the_command(tmp_path):
    with pytest.raises(RuntimeError, match=r"vllm_facts.json is missing or not JSON .*`./build.py vllm-facts"):
        facts_module._load(tmp_path / "vllm_facts.json")
    (tmp_path / "vllm_facts.json").write_text('{"vllm": "0.27.1"}')
    with pytest.raises(RuntimeError, match=r"lacks attention_backends, .*: regenerate it with `./build.py vllm-facts"):
        facts_module._load(tmp_path / "vllm_facts.json")


def test_the_host_check_names_each_difference_the_file_and_the_command():
    vllm_facts_file.check(vllm_facts_file.render(FACTS), FACTS, "a40")  # up to date: no error
    newer = {**FACTS, "moe_backends": FACTS["moe_backends"] + ["tilelang"],
             "serve_options": {**FACTS["serve_options"], "max-model-len": 0}}
    with pytest.raises(PrebakeError) as caught:
        vllm_facts_file.check(vllm_facts_file.FILE.read_text(), newer, "ada")
    message = str(caught.value)
    assert str(vllm_facts_file.FILE) in message and "run `./build.py vllm-facts --variant ada`" in message
    assert "moe_backends: vLLM has tilelang that the file lacks, the file has nothing that vLLM lacks" in message
    assert "serve_options: max-model-len (1 in the file, 0 in vLLM)" in message
    with pytest.raises(PrebakeError, match="not as the generator writes it"):
        vllm_facts_file.check(json.dumps(COMMITTED), FACTS, "a40")  # same facts, hand-formatted


def _in_image(tmp_path, file_facts):
    (tmp_path / "entrypoint").mkdir(parents=True)
    (tmp_path / "entrypoint" / "vllm_facts.json").write_text(vllm_facts_file.render(file_facts))
    vllm_facts_probe._OUTCOME.clear()
    spec = {"pins": {"vllm": "0.27.1"}, "variant": "a40", "bridge": str(tmp_path / "entrypoint" / "bridge.py"),
            "known_vllm_facts": {"facts": FACTS, "sleep": {"sleep_flag": True, "reload_weights": True}}}
    try:
        return facts_check.check(spec)
    finally:
        vllm_facts_probe._OUTCOME.clear()


def test_the_self_tests_check_passes_on_the_same_facts_and_fails_naming_the_file_and_the_command(tmp_path):
    ok, detail, record = _in_image(tmp_path / "same", FACTS)
    assert ok and "entrypoint/vllm_facts.json matches vLLM 0.27.1 (recorded for this stack)" in detail
    assert record["vllm_facts"]["facts"] == FACTS
    stale = {**FACTS, "dev_endpoints": [p for p in FACTS["dev_endpoints"] if p != "/collective_rpc"]}
    ok, detail, _ = _in_image(tmp_path / "stale", stale)
    assert not ok
    assert detail.startswith("entrypoint/vllm_facts.json does not match this image's vLLM 0.27.1: dev_endpoints: "
                             "vLLM has /collective_rpc that the file lacks")
    assert detail.endswith("run `./build.py vllm-facts --variant a40` (with this build's options) and commit "
                           "entrypoint/vllm_facts.json")
