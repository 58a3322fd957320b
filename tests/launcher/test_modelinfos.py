"""The copy rule of vLLM's baked model-info cache (entrypoint/launcher/modelinfos.py)."""

import hashlib
import json

import pytest

from entrypoint.launcher.modelinfos import copy_modelinfos, decide_modelinfos, module_hash, vllm_cache_root

QWEN3 = "vllm-model_executor-models-qwen3-Qwen3ForCausalLM.json"
KIMI = "vllm-models-kimi_k3-KimiLinearForCausalLM.json"


@pytest.fixture
def image(tmp_path):
    """A vllm package with one module and one package, and a baked folder made for exactly those sources."""
    package = tmp_path / "site-packages" / "vllm"
    (package / "model_executor" / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model_executor" / "models" / "qwen3.py").write_text("class Qwen3ForCausalLM: pass\n")
    (package / "models" / "kimi_k3" / "layers").mkdir(parents=True)
    (package / "models" / "kimi_k3" / "__init__.py").write_text("from .model import KimiLinearForCausalLM\n")
    (package / "models" / "kimi_k3" / "model.py").write_text("class KimiLinearForCausalLM: pass\n")
    (package / "models" / "kimi_k3" / "layers" / "mla.py").write_text("X = 1\n")
    baked = tmp_path / "baked"
    (baked / "modelinfos").mkdir(parents=True)
    entries = {"Qwen3ForCausalLM": (QWEN3, "model_executor/models/qwen3.py"),
               "KimiLinearForCausalLM": (KIMI, "models/kimi_k3/__init__.py")}
    manifest = {}
    for arch, (name, source) in entries.items():
        digest = module_hash(package / source)
        (baked / "modelinfos" / name).write_text(json.dumps({"hash": digest, "modelinfo": {"architecture": arch}}))
        manifest[arch] = {"file": name, "hash": digest, "module": "m", "source": source}
    (baked / "modelinfos.json").write_text(json.dumps({"vllm": "0.27.1", "architectures": manifest}))
    return {"package": package, "baked": baked, "root": tmp_path / "volume" / "vllm"}


def decide(image):
    return decide_modelinfos({"VLLM_CACHE_ROOT": str(image["root"])}, str(image["baked"]), image["package"])


def test_module_hash_is_vllms_rule():
    """md5 over `relative path \\0 bytes \\0` per file, as vLLM 0.27.1's registry computes it."""
    from pathlib import Path
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "qwen3.py"
        source.write_bytes(b"abc")
        assert module_hash(source) == hashlib.md5(b"qwen3.py\0abc\0").hexdigest()
        (Path(folder) / "sub").mkdir()
        (Path(folder) / "sub" / "b.py").write_bytes(b"B")
        (Path(folder) / "__init__.py").write_bytes(b"I")
        expected = hashlib.md5(b"__init__.py\0I\0qwen3.py\0abc\0sub/b.py\0B\0").hexdigest()
        assert module_hash(Path(folder) / "__init__.py") == expected


def test_missing_targets_are_copied_and_then_already_there(image):
    copies, decision = decide(image)
    targets = {image["root"] / "modelinfos" / QWEN3, image["root"] / "modelinfos" / KIMI}
    assert set(map(str, targets)) == set(copies)
    assert decision.decision.startswith("2 copied to ") and "Qwen3ForCausalLM" in decision.decision
    assert copy_modelinfos(copies) is None
    for target in targets:
        assert target.read_bytes() == (image["baked"] / "modelinfos" / target.name).read_bytes()
    again, decision = decide(image)
    assert again == {} and decision.decision.endswith("0 copied to " + str(image["root"] / "modelinfos")
                                                      + "; 2 already there")


def test_a_file_with_another_hash_is_replaced_when_the_baked_one_matches_this_vllm(image):
    target = image["root"] / "modelinfos" / QWEN3
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"hash": "0" * 32, "modelinfo": {}}))  # another module's source: vLLM would redo it
    copies, _ = decide(image)
    assert str(target) in copies
    copy_modelinfos(copies)
    assert json.loads(target.read_text())["hash"] == module_hash(image["package"] / "model_executor/models/qwen3.py")


def test_nothing_is_copied_when_the_images_vllm_source_is_not_the_baked_one(image):
    """vLLM upgraded in place (or the module edited): the baked file would be stale; a file vLLM wrote for the
    module it has now stays, and a missing one is left to vLLM's own inspection."""
    (image["package"] / "model_executor/models/qwen3.py").write_text("class Qwen3ForCausalLM: 'newer'\n")
    (image["package"] / "models/kimi_k3/layers/mla.py").write_text("X = 2\n")
    written = image["root"] / "modelinfos" / QWEN3
    written.parent.mkdir(parents=True)
    newer = json.dumps({"hash": module_hash(image["package"] / "model_executor/models/qwen3.py"), "modelinfo": {}})
    written.write_text(newer)
    copies, decision = decide(image)
    assert copies == {}
    assert "2 not for this image's vLLM module source, left alone" in decision.decision
    assert written.read_text() == newer


def test_without_vllm_nothing_is_copied(image, monkeypatch):
    import entrypoint.launcher.modelinfos as modelinfos
    monkeypatch.setattr(modelinfos, "vllm_package", lambda: None)
    copies, decision = modelinfos.decide_modelinfos({}, str(image["baked"]))
    assert copies == {} and decision.decision == "none copied" and "no vllm package" in decision.why


def test_without_a_baked_cache_nothing_is_copied(tmp_path, image):
    copies, decision = decide_modelinfos({}, str(tmp_path / "none"), image["package"])
    assert copies == {} and decision.decision == "none copied" and "no baked model-info cache" in decision.why
    (image["baked"] / "modelinfos.json").write_text("{not json")
    copies, decision = decide(image)
    assert copies == {} and "damaged" in decision.why and "self-test" in decision.why


def test_a_failed_copy_is_one_line_and_leaves_no_temporary(image):
    copies, _ = decide(image)
    image["root"].parent.mkdir(parents=True)
    image["root"].write_text("a file where the cache root should be")
    line = copy_modelinfos(copies)
    assert line.startswith("modelinfos: cannot copy ") and "subprocess instead" in line
    assert [p.name for p in image["root"].parent.iterdir()] == ["vllm"]


def test_vllm_cache_root_as_vllm_resolves_it(monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    assert vllm_cache_root({"VLLM_CACHE_ROOT": "/workspace/vllm"}) == "/workspace/vllm"
    assert vllm_cache_root({"XDG_CACHE_HOME": "/x"}) == "/x/vllm"
    assert vllm_cache_root({}) == "/home/u/.cache/vllm"


def test_the_real_launcher_copies_the_baked_files_before_vllm_starts(launcher, image, tmp_path, monkeypatch):
    """The image's layout: the entrypoint in a folder whose sibling modelinfos/ is the baked cache, the vllm
    package on the launcher's path; the stand-in vllm records what it finds in its cache folder when it starts."""
    import os
    import shutil
    import stat

    import prebake_testing.hosts
    from prebake_testing import REPO
    from prebake_testing.hosts import exec_ports

    opt = tmp_path / "opt-prebake"
    shutil.copytree(REPO / "entrypoint", opt / "entrypoint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(image["baked"], opt / "modelinfos")
    monkeypatch.setattr(prebake_testing.hosts, "LAUNCH", opt / "entrypoint" / "launch.py")
    record = tmp_path / "vllm-saw.json"
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "vllm"
    stand_in.write_text("#!/usr/bin/env python3\nimport json, os\n"
                        "folder = os.path.join(os.environ['VLLM_CACHE_ROOT'], 'modelinfos')\n"
                        f"json.dump(sorted(os.listdir(folder)) if os.path.isdir(folder) else [], open({str(record)!r}, 'w'))\n")
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    root = tmp_path / "volume"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(image["package"].parent),
           "VL_CACHE_ROOT": str(root), "VL_BRIDGE": "off", **exec_ports()}
    planned = launcher.plan("a40x2_570", env=env)
    decision = planned.decision("modelinfos")[0]["decision"]
    assert decision == f"2 copied to {root}/vllm/modelinfos (KimiLinearForCausalLM, Qwen3ForCausalLM)"
    assert planned.plan["copies"] and not (root / "vllm" / "modelinfos").exists()  # a dry run copies nothing
    ran = launcher.run("a40x2_570", env=env, dry_run=False)
    assert ran.rc == 0, ran.stderr
    assert json.loads(record.read_text()) == sorted([KIMI, QWEN3])
    assert "modelinfos: 2 copied to " in ran.stderr
    assert launcher.plan("a40x2_570", env=env).decision("modelinfos")[0]["decision"].endswith("; 2 already there")


# --- hostile round 6 (issue 56): the volume's model infos are untrusted (entrypoint/untrusted.py) ------------------

def test_a_deeply_nested_model_info_on_the_volume_is_replaced_not_a_crash(image):
    target = image["root"] / "modelinfos" / QWEN3
    target.parent.mkdir(parents=True)
    target.write_bytes(b'{"hash": ' + b"[" * 60_000 + b"]" * 60_000 + b"}")
    copies, _ = decide(image)
    assert str(target) in copies
    assert copy_modelinfos(copies) is None and json.loads(target.read_text())["modelinfo"]


def test_a_fifo_as_a_model_info_never_blocks_the_launcher(image):
    import os
    import threading

    target = image["root"] / "modelinfos" / QWEN3
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    found: list = []
    worker = threading.Thread(target=lambda: found.append(decide(image)), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # the reader blocked in open(): let it go before failing
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
        pytest.fail("reading a FIFO among the model infos blocked the launcher")
    copies, _ = found[0]
    assert copy_modelinfos(copies) is None and target.is_file()  # the copy replaced it


def test_the_copy_never_writes_through_a_link_at_its_temporary_name(image, tmp_path):
    import os

    target = image["root"] / "modelinfos" / QWEN3
    target.parent.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the launcher's to write")
    planted = target.parent / f"{QWEN3}.prebake-{os.getpid()}.tmp"
    planted.symlink_to(outside)
    copies, _ = decide(image)
    assert copy_modelinfos(copies) is None
    assert outside.read_text() == "not the launcher's to write"
    assert target.is_file() and not target.is_symlink() and json.loads(target.read_text())["hash"]
    assert not os.path.lexists(planted)
