"""The self-test's spec, report and vllm-args machinery, without Docker (the checks themselves run
against real images in tests/integration/test_selftest.py and prebuilt/test_selftest_a40.py)."""

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from prebake.incontainer import launcher_argv, vllm_parse
from prebake import selftest, selftest_record
from prebake.errors import PrebakeError
from prebake.variants import get_variant

REPO = Path(__file__).resolve().parents[2]
OFFLINE = REPO / "images" / "offline"
FIXTURE_IMAGES = REPO / "tests" / "fixtures" / "images"


def _spec(name: str, images: Path) -> dict:
    variant = get_variant(name, images)
    return selftest.spec_for(variant, (images / variant.stack.lock).read_text())


def test_a_vllm_stack_gets_every_check_and_the_host_profiles():
    spec = _spec("a40", OFFLINE)
    assert spec["checks"] == ["marker", "pins", "imports", "dependencies", "bridge", "nvcc", "nvrtc",
                              "one-cuda-release", "vllm-facts", "vllm-args", "vllm-knobs", "thinking-controls",
                              "claude-code-sessions", "mm-dummy-inputs",
                              "sleep-mode", "flashinfer-aot", "modelinfos"]
    assert spec["flashinfer_aot"] == [] and spec["flashinfer_aot_source"] == "a40.toml flashinfer_aot"
    # the scaled folders of the catalogue's vision models, from the GPU harness's one writer of them
    assert sorted(spec["mm_models"]) == ["dense", "ornith", "ornithfp8", "ornithnvfp4", "qwen38nvfp4"]
    assert json.loads(spec["mm_models"]["ornith"]["preprocessor_config.json"])["processor_class"] == "Qwen3VLProcessor"
    assert _spec("blackwell", OFFLINE)["flashinfer_aot"] == ["sampling", "fp4_gemm_cutlass_sm120", "fused_moe_120"]
    conf = spec["vllm_args"]
    assert sorted(conf["hosts"]) == sorted(selftest.VLLM_ARGS_HOSTS)
    assert conf["hosts"]["a40x2_570"]["driver_version"].startswith("570.")
    assert "def main(argv)" in conf["fake_nvidia_smi"]
    assert conf["launcher"] == "/opt/prebake/entrypoint/launch.py"
    assert conf["knob_host"] in conf["hosts"]
    json.dumps(spec)  # it travels as one argv string


def test_a_stack_without_vllm_still_lists_the_vllm_checks_but_sends_nothing_for_them():
    spec = _spec("tiny", FIXTURE_IMAGES)
    assert "vllm" not in spec["pins"]
    assert spec["checks"][-9:] == ["vllm-facts", "vllm-args", "vllm-knobs", "thinking-controls", "claude-code-sessions",
                                   "mm-dummy-inputs", "sleep-mode", "flashinfer-aot", "modelinfos"]
    assert "vllm_args" not in spec and "mm_models" not in spec and spec["flashinfer_aot"] == []


def test_without_vllm_the_vllm_checks_report_skipped_not_passed_silently():
    spec = {"checks": ["vllm-args", "vllm-knobs"], "pins": {"huggingface-hub": "1.33.0"}}
    done = subprocess.run([sys.executable, "-m", "prebake.incontainer", json.dumps(spec)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert [(r["check"], r["ok"], r["skipped"]) for r in report] == [("vllm-args", True, True),
                                                                      ("vllm-knobs", True, True)]
    assert report[0]["detail"].startswith("skipped: the lock pins no vllm")


def test_missing_host_profiles_are_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(selftest, "HOSTS_DIR", tmp_path)
    with pytest.raises(PrebakeError, match="host profiles"):
        selftest.vllm_args_spec()


def test_the_knob_sweep_reads_every_choice_switch_and_number_from_the_launcher():
    from entrypoint.launcher import knobs

    settings = launcher_argv.knob_settings(knobs)
    for name in ("VL_KV", "VL_ATTN", "VL_MOE_BACKEND", "VL_MAMBA_DTYPE"):  # every value of a choice knob
        assert {value for knob, value in settings if knob == name} == set(knobs.KNOBS_BY_NAME[name].accepted.split("|"))
    assert ("VL_NUMA", "on") in settings and ("VL_NUMA", "off") in settings
    assert ("VL_SEQS", "2") in settings and ("VL_UTIL", "0.85") in settings
    names = {name for name, _ in settings}
    assert not names & {"VL_MODEL", "VL_PORT", "VL_NVIDIA_SMI", "VL_PREBAKED_MARKER", "VL_ALIASES"}


FAKE_KNOBS = '''
from dataclasses import dataclass

@dataclass(frozen=True)
class Knob:
    name: str
    default: str
    accepted: str
    meaning: str
    parse: object

def positive_int(text):
    return int(text)

ON_OFF = "on|off (also 1/0)"
KNOBS = (Knob("VL_MODEL", "m1", "a catalogue key", "", None), Knob("VL_X", "", "a|refused|boom", "", None),
         Knob("VL_N", "", "integer >= 1", "", positive_int), Knob("VL_FREE", "", "any text", "", None))
'''
FAKE_LAUNCH = '''
class LaunchError(Exception):
    pass

class Plan:
    def __init__(self, argv):
        self.argv = tuple(argv)

def make_plan(env, user_args):
    if env.get("VL_X") == "refused":
        raise LaunchError("not for this model")
    if env.get("VL_X") == "boom":
        raise KeyError("a bug")
    return Plan(["vllm", "serve", env["VL_MODEL"], "--x", env.get("VL_X", "-"), "--n", env.get("VL_N", "-")])
'''


def test_the_knob_sweep_separates_argvs_launcher_refusals_and_launcher_crashes(tmp_path):
    package = tmp_path / "fake_entrypoint_sweep"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "launcher").mkdir()  # the image's layout: launch.py runs the package launcher/
    (package / "launcher" / "__init__.py").write_text("")
    (package / "launcher" / "knobs.py").write_text(FAKE_KNOBS)
    (package / "launcher" / "main.py").write_text(FAKE_LAUNCH)
    (package / "launch.py").write_text("")
    (package / "models.toml").write_text("[models.m1]\n[models.m2]\n")
    conf = {"launcher": str(package / "launch.py"), "knob_host": "h200_580"}
    with ThreadPoolExecutor(4) as pool:
        jobs, settings, refused, crashes = launcher_argv.knob_argvs(conf, {"VL_NVIDIA_SMI": "unused"}, pool, str(tmp_path))
    assert settings == 4  # VL_X a|refused|boom, VL_N 2; not the model, not free text
    assert refused == 2 and len(jobs) == 4
    assert {job["label"] for job in jobs} >= {"m1 on h200_580 with VL_X=a", "m2 on h200_580 with VL_N=2"}
    assert crashes == [f"[{m} on h200_580 with VL_X=boom] the launcher crashed: KeyError: 'a bug'" for m in ("m1", "m2")]


def _marker(tmp_path: Path, compat: str | None) -> Path:
    path = tmp_path / "marker.json"
    path.write_text(json.dumps({"schema": 1, "variant": "a40", "cuda": "13.0", "cuda_arch": "8.6",
                                "cuda_compat_dir": compat, "launch_defaults": {"VL_MODEL": "ornith"}}))
    return path


def test_every_model_and_host_profile_gets_an_argv_from_the_real_launcher(tmp_path):
    conf = selftest.vllm_args_spec()
    conf["launcher"] = str(REPO / "entrypoint" / "launch.py")
    smi, profiles = launcher_argv.write_hosts(conf, str(tmp_path))
    marker = _marker(tmp_path, None)  # built --without cuda-compat, like the local a40 image
    compat_marker = launcher_argv.marker_with_compat(str(marker), str(tmp_path))
    base = {"PATH": "/usr/bin:/bin", "VL_NVIDIA_SMI": smi, "HF_HOME": str(tmp_path / "hf"),
            "VL_PREBAKED_MARKER": str(marker)}
    with ThreadPoolExecutor(8) as pool:
        jobs, refusals, compat_hosts = launcher_argv.catalogue_argvs(conf, base, profiles, compat_marker, pool,
                                                                      str(tmp_path))
    models = launcher_argv.catalogue(conf["launcher"])
    assert len(models) >= 9
    # W4A4 weights need Blackwell: refused (naming it) on every profile of an older family
    blackwell = {host for host in profiles if host.startswith("rtxpro")}
    assert sorted(label for label, _ in refusals) == sorted(
        f"qwen38nvfp4 on {host}" for host in profiles if host not in blackwell)
    assert all("needs Blackwell" in why for _, why in refusals)
    assert len(jobs) == len(models) * len(profiles) - len(refusals)
    # hosts older than 580 are refused by an image without compat: their argv comes from the copy
    assert compat_hosts == {"a40x2_570", "rtx6000ada_550"}
    two_a40 = next(job for job in jobs if job["label"] == "ornith on a40x2_570 (as built with cuda-compat)")
    assert two_a40["argv"][:2] == ["vllm", "serve"]
    assert two_a40["argv"][two_a40["argv"].index("--tensor-parallel-size") + 1] == "2"


def test_a_marker_with_compat_needs_no_copy(tmp_path):
    assert launcher_argv.marker_with_compat(str(_marker(tmp_path, "/usr/local/cuda-13.0/compat")), str(tmp_path)) is None


def test_rejections_are_grouped_by_message_and_name_model_host_and_knob():
    jobs = [{"label": f"{m} on h200_580 with VL_PARTIAL=2", "argv": ["vllm", "serve", m, "--p", "2"]}
            for m in ("ornith", "qwen")] + [{"label": "kimi on h200_580", "argv": ["vllm", "serve", "kimi"]}]
    errors = {json.dumps(jobs[0]["argv"]): "unrecognized arguments: --p 2",
              json.dumps(jobs[1]["argv"]): "unrecognized arguments: --p 2",
              json.dumps(jobs[2]["argv"]): None}
    assert vllm_parse.rejections(jobs, errors) == [
        "[ornith on h200_580 with VL_PARTIAL=2, qwen on h200_580 with VL_PARTIAL=2 (2 argvs)] "
        "unrecognized arguments: --p 2"]


def test_run_prints_each_check_and_refuses_the_tag_on_a_failure(monkeypatch, capsys):
    report = [{"check": "marker", "ok": True, "detail": "fine", "skipped": False},
              {"check": "vllm-args", "ok": False, "detail": "[ornith on h200_580 (1 argvs)] bad", "skipped": False},
              {"check": "vllm-knobs", "ok": True, "detail": "skipped: no vllm", "skipped": True}]
    monkeypatch.setattr(selftest, "run_in_image", lambda client, image, spec: (1, report, ""))
    variant = get_variant("a40", OFFLINE)
    with pytest.raises(PrebakeError, match="checks failed: vllm-args"):
        selftest.run(None, "sha256:" + "0" * 64, variant, (OFFLINE / variant.stack.lock).read_text())
    err = capsys.readouterr().err
    assert "[self-test] ok   marker: fine" in err
    assert "[self-test] FAIL vllm-args: [ornith on h200_580 (1 argvs)] bad" in err
    assert "[self-test] skip vllm-knobs: skipped: no vllm" in err


def test_the_registry_gives_every_check_a_unique_name_a_level_and_a_check_function():
    from prebake.incontainer.checks import BY_NAME, CHECKS
    from prebake.incontainer.common import STACK, VARIANT

    assert len(BY_NAME) == len(CHECKS)
    for module in CHECKS:
        assert module.LEVEL in (STACK, VARIANT), module.__name__
        assert callable(module.check), module.__name__
    assert {m.NAME for m in CHECKS if getattr(m, "NEEDS_CUDA_TOOLCHAIN", False)} == {"nvcc", "nvrtc", "one-cuda-release"}


def test_the_in_container_package_imports_only_the_standard_library_and_its_own_modules():
    import ast

    for path in selftest.PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            # programs/ run in the image's venv: vLLM, its torch, the thinking plugin, and each other
            programs_may = ({"vllm", "torch", "prebake_thinking", "fastapi", "transformers", "tokenizers",
                             "PIL"}  # vLLM's own requirements (Pillow: "required for image processing")
                            | {p.stem for p in path.parent.glob("*.py")})
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or (path.parent.name == "programs" and top in programs_may), \
                    f"{path.relative_to(REPO)} imports {name}: the image's Python may not have it"


def test_the_archive_sent_into_the_container_holds_the_package_and_the_parser_program():
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(selftest.package_archive())) as tar:
        names = tar.getnames()
    assert "prebake-selftest/incontainer/__main__.py" in names
    assert "prebake-selftest/incontainer/checks/nvrtc.py" in names
    assert "prebake-selftest/incontainer/programs/serve_parser.py" in names
    assert "prebake-selftest/incontainer/programs/qwen_system_first.jinja" in names  # the sessions check renders it
    assert not [n for n in names if "__pycache__" in n]


STACK_ID = "sha256:" + "5" * 64


def _fake_container(monkeypatch, verdicts: dict[str, bool]):
    """run_in_image replaced: each check named in the spec passes or fails as `verdicts` says."""
    sent = []

    def run_in_image(client, image, spec):
        sent.append(list(spec["checks"]))
        report = [{"check": name, "ok": verdicts.get(name, True), "detail": f"{name} detail", "skipped": False}
                  for name in spec["checks"]]
        return (0 if all(r["ok"] for r in report) else 1), report, ""

    monkeypatch.setattr(selftest, "run_in_image", run_in_image)
    return sent


def _a40():
    variant = get_variant("a40", OFFLINE)
    return variant, (OFFLINE / variant.stack.lock).read_text()


def test_stack_checks_are_recorded_per_stack_image_id_and_not_run_again(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path))
    sent = _fake_container(monkeypatch, {})
    variant, lock = _a40()
    selftest.run(None, "sha256:" + "1" * 64, variant, lock, stack_image_id=STACK_ID)
    selftest.run(None, "sha256:" + "2" * 64, variant, lock, stack_image_id=STACK_ID)
    assert sent[0] == selftest.spec_for(variant, lock)["checks"]
    assert sent[1] == ["marker", "bridge", "vllm-facts", "vllm-args", "vllm-knobs", "thinking-controls",
                       "claude-code-sessions", "mm-dummy-inputs", "sleep-mode", "modelinfos"]  # the variant checks
    err = capsys.readouterr().err
    assert f"[self-test] ok   nvcc: nvcc detail (recorded for stack {STACK_ID[:19]}, not run again)" in err
    # another stack image (same name or not: only the id counts) runs them all again
    selftest.run(None, "sha256:" + "3" * 64, variant, lock, stack_image_id="sha256:" + "6" * 64)
    assert sent[2] == sent[0]
    # so does another variant on the same stack: nvcc and NVRTC compile for its own architecture
    ada = get_variant("ada", OFFLINE)
    selftest.run(None, "sha256:" + "4" * 64, ada, lock, stack_image_id=STACK_ID)
    assert sent[3] == sent[0]


def test_a_failed_stack_check_is_not_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path))
    _fake_container(monkeypatch, {"pins": False})
    variant, lock = _a40()
    with pytest.raises(PrebakeError, match="checks failed: pins"):
        selftest.run(None, "sha256:" + "1" * 64, variant, lock, stack_image_id=STACK_ID)
    sent = _fake_container(monkeypatch, {})
    selftest.run(None, "sha256:" + "1" * 64, variant, lock, stack_image_id=STACK_ID)
    assert "pins" in sent[0]


def test_a_failed_variant_check_still_tags_nothing_and_the_stack_record_stays_valid(monkeypatch, tmp_path):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path))
    variant, lock = _a40()
    _fake_container(monkeypatch, {})
    selftest.run(None, "sha256:" + "1" * 64, variant, lock, stack_image_id=STACK_ID)
    _fake_container(monkeypatch, {"vllm-knobs": False})
    with pytest.raises(PrebakeError, match="checks failed: vllm-knobs"):
        selftest.run(None, "sha256:" + "2" * 64, variant, lock, stack_image_id=STACK_ID)


def test_a_change_to_the_checks_code_or_the_lock_invalidates_the_record(monkeypatch, tmp_path):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path / "state"))
    variant, lock = _a40()
    spec = selftest.spec_for(variant, lock)
    before = selftest_record.key(STACK_ID, spec)
    assert selftest_record.key(STACK_ID, {**spec, "pins": {**spec["pins"], "vllm": "0.27.2"}}) != before
    copy = tmp_path / "incontainer"
    shutil.copytree(selftest_record.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(selftest_record, "PACKAGE", copy)
    assert selftest_record.key(STACK_ID, spec) == before
    nvcc = copy / "checks" / "nvcc.py"
    nvcc.write_text(nvcc.read_text() + "\n# a changed check\n")
    assert selftest_record.key(STACK_ID, spec) != before


def test_a_tampered_record_is_not_trusted(monkeypatch, tmp_path):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path))
    variant, lock = _a40()
    _fake_container(monkeypatch, {})
    selftest.run(None, "sha256:" + "1" * 64, variant, lock, stack_image_id=STACK_ID)
    (record,) = (tmp_path / "selftest").glob("*.json")
    data = json.loads(record.read_text())
    data["report"][0]["ok"] = False
    record.write_text(json.dumps(data))
    assert selftest_record.load(STACK_ID, selftest.spec_for(variant, lock)) is None
    record.write_text("not json")
    assert selftest_record.load(STACK_ID, selftest.spec_for(variant, lock)) is None


def test_recorded_verdicts_spare_the_vllm_process_and_new_argvs_are_parsed(monkeypatch, tmp_path):
    jobs = [{"label": "m on h", "argv": ["vllm", "serve", "m"]}, {"label": "n on h", "argv": ["vllm", "serve", "n"]}]
    monkeypatch.setattr(vllm_parse, "write_hosts", lambda conf, folder: ("smi", {"h": "h.json"}))
    monkeypatch.setattr(vllm_parse, "marker_with_compat", lambda marker, folder: None)
    monkeypatch.setattr(vllm_parse, "catalogue_argvs", lambda *args: (jobs, [], set()))
    parsed = []

    def parse(todo, folder):
        parsed.append([job["label"] for job in todo])
        return {"results": [{"label": job["label"], "error": "bad"} for job in todo], "stub": "s"}

    monkeypatch.setattr(vllm_parse, "parse_with_vllm", parse)
    spec = {"vllm_args": {}, "marker": "/m", "checks": ["vllm-args"],
            "known_verdicts": {json.dumps(jobs[0]["argv"]): None}}
    monkeypatch.setattr(vllm_parse, "_VLLM_OUTCOME", {})
    found = vllm_parse.vllm_outcome(spec)
    assert parsed == [["n on h"]] and found["recorded"] == 1
    assert found["errors"] == {json.dumps(jobs[0]["argv"]): None, json.dumps(jobs[1]["argv"]): "bad"}
    assert found["new_verdicts"] == {json.dumps(jobs[1]["argv"]): "bad"}

    spec["known_verdicts"][json.dumps(jobs[1]["argv"])] = "bad"
    monkeypatch.setattr(vllm_parse, "_VLLM_OUTCOME", {})
    found = vllm_parse.vllm_outcome(spec)
    assert parsed == [["n on h"]]  # nothing new: no vLLM process at all
    assert found["outcome"]["stub"] == "not needed" and found["new_verdicts"] == {}


def test_the_host_sends_recorded_verdicts_and_records_new_ones_per_stack_and_image_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path))
    variant, lock = _a40()
    sent = []

    def run_in_image(client, image, spec):
        sent.append(dict(spec.get("known_verdicts", {})))
        report = [{"check": name, "ok": True, "detail": "d", "skipped": False} for name in spec["checks"]]
        report[-2]["verdicts"] = {'["vllm", "serve", "x"]': None} if image.endswith("1") else {}
        return 0, report, ""

    class Images:
        def get(self, image_id):
            env = ["TORCH_CUDA_ARCH_LIST=8.9"] if image_id.endswith("3") else ["TORCH_CUDA_ARCH_LIST=8.6"]
            return type("Image", (), {"attrs": {"Config": {"Env": env}}})()

    client = type("Client", (), {"images": Images()})()
    monkeypatch.setattr(selftest, "run_in_image", run_in_image)
    selftest.run(client, "sha256:" + "1" * 64, variant, lock, stack_image_id=STACK_ID)
    selftest.run(client, "sha256:" + "2" * 64, variant, lock, stack_image_id=STACK_ID)
    assert sent == [{}, {'["vllm", "serve", "x"]': None}]
    # another environment in the variant image (ENV lines): vLLM parses everything again
    selftest.run(client, "sha256:" + "3" * 64, variant, lock, stack_image_id=STACK_ID)
    assert sent[2] == {}


def test_a_launcher_whose_command_line_and_make_plan_disagree_goes_through_the_command_line(tmp_path):
    package = tmp_path / "fake_entrypoint_cli"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "launcher").mkdir()
    (package / "launcher" / "__init__.py").write_text("")
    (package / "launcher" / "knobs.py").write_text(FAKE_KNOBS)
    (package / "launcher" / "main.py").write_text(FAKE_LAUNCH)
    (package / "launch.py").write_text(FAKE_LAUNCH + '''
if __name__ == "__main__":
    import json, os
    print(json.dumps({"argv": ["vllm", "serve", os.environ["VL_MODEL"], "--from-the-command-line"]}))
''')
    (package / "models.toml").write_text("[models.m1]\n[models.m2]\n")
    conf = {"launcher": str(package / "launch.py")}
    with ThreadPoolExecutor(4) as pool:
        jobs, refusals, _ = launcher_argv.catalogue_argvs(conf, {"PATH": "/usr/bin:/bin"}, {"h1": "h1.json"}, None,
                                                          pool, str(tmp_path))
    assert [job["argv"][-1] for job in jobs] == ["--from-the-command-line"] * 2  # every model, not only the first
    assert refusals == [("m1 on h1", "the launcher's command line and its make_plan give different argvs; "
                                     "every model of this host went through the command line")]
