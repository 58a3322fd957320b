"""The self-test's modelinfos verdict on what its probe reads in the image (prebake/incontainer/checks/modelinfos.py)."""

from prebake.incontainer.checks.modelinfos import verdict

GOOD = {"hash": "a" * 32, "now": "a" * 32, "file": "a" * 32, "source": "/v/qwen3.py"}


def found(baked, catalogue=("Qwen3ForCausalLM",)):
    return {"dir": "/opt/prebake/modelinfos", "baked": baked, "catalogue": list(catalogue), "vllm_imported": False}


def test_every_catalogue_architecture_baked_for_this_vllm_passes():
    ok, detail = verdict(found({"Qwen3ForCausalLM": GOOD}))
    assert ok and "1 architectures baked" in detail


def test_a_missing_manifest_fails_naming_the_step():
    ok, detail = verdict(found(None))
    assert not ok and "step 7c" in detail


def test_a_catalogue_architecture_not_baked_fails():
    ok, detail = verdict(found({"Qwen3ForCausalLM": GOOD}, ("Qwen3ForCausalLM", "NemotronHForCausalLM")))
    assert not ok and "NemotronHForCausalLM is not baked" in detail


def test_a_hash_that_is_not_the_module_sources_fails():
    ok, detail = verdict(found({"Qwen3ForCausalLM": {**GOOD, "now": "b" * 32}}))
    assert not ok and "vLLM changed after the bake" in detail
    ok, detail = verdict(found({"Qwen3ForCausalLM": {**GOOD, "file": "c" * 32}}))
    assert not ok and "the baked file's hash" in detail
