"""The self-test's vLLM programs: one zygote forks a child per program (isolation, exit status, output, timeout),
and a program's passing outcome is kept under exactly what it depends on. Without Docker or vLLM: the zygote
preloads what the host's Python has of its list, and the programs here are small stand-ins; the real programs run
against the a40 image in tests/integration/prebuilt/test_selftest_a40.py."""

import json
import textwrap

import pytest

from prebake import selftest, selftest_record
from prebake.incontainer import program_records, vllm_programs
from prebake.variants import get_variant
from prebake_testing import REPO

STACK_ID = "sha256:" + "7" * 64


@pytest.fixture
def zygote(monkeypatch):
    """A fresh zygote for the test (no stub libcuda on the build machine's Python), stopped afterwards."""
    monkeypatch.setattr(vllm_programs, "build_stub_libcuda", lambda folder: (None, "no stub in this test"))
    monkeypatch.setattr(vllm_programs, "_STATE", {})
    yield vllm_programs
    made = vllm_programs._STATE.get("zygote")
    if made:
        made.process.stdin.close()
        made.process.wait(timeout=30)


def _program(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_each_program_runs_as_its_own_child_that_leaves_the_zygote_as_it_was(zygote, tmp_path):
    (tmp_path / "sibling.py").write_text("VALUE = 'from the folder of the program'\n")
    patcher = _program(tmp_path, "patcher.py", """
        import json, os, sys
        import sibling
        json.PATCHED_BY_A_PROGRAM = True  # as the plugin patches vLLM's classes
        print(json.dumps({"argv": sys.argv[1:], "env": os.environ.get("ASKED"), "sibling": sibling.VALUE}))
        print("to stderr", file=sys.stderr)
        sys.exit(3)
    """)
    reader = _program(tmp_path, "reader.py", """
        import json, os
        print(json.dumps({"patched": hasattr(json, "PATCHED_BY_A_PROGRAM"), "env": os.environ.get("ASKED")}))
    """)
    zygote.start()
    first = zygote.run(patcher, ["a", "b"], env={"ASKED": "yes"})
    second = zygote.run(reader)
    assert first.returncode == 3 and first.stderr.strip() == "to stderr" and first.note == "no stub in this test"
    assert json.loads(first.stdout) == {"argv": ["a", "b"], "env": "yes", "sibling": "from the folder of the program"}
    assert second.returncode == 0 and json.loads(second.stdout) == {"patched": False, "env": None}
    assert zygote._STATE["zygote"].ready["threads"] >= 1


def test_a_program_that_crashes_or_hangs_fails_alone(zygote, tmp_path):
    crash = _program(tmp_path, "crash.py", "raise RuntimeError('broken vLLM')\n")
    hang = _program(tmp_path, "hang.py", "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    fine = _program(tmp_path, "fine.py", "print('ok')\n")
    crashed = zygote.run(crash)
    assert crashed.returncode == 1 and "RuntimeError: broken vLLM" in crashed.stderr
    hung = zygote.run(hang, timeout=1)
    assert hung.returncode == 128 + 9 and hung.stdout == "started\n"  # killed, what it printed kept
    assert zygote.run(fine).stdout == "ok\n"


def test_a_zygote_that_cannot_start_fails_each_program_with_its_error(zygote, monkeypatch, tmp_path):
    broken = _program(tmp_path, "zygote.py", "raise SystemExit('the preload imported vllm')\n")
    monkeypatch.setattr(vllm_programs, "ZYGOTE", broken)
    outcome = zygote.run(_program(tmp_path, "fine.py", "print('ok')\n"))
    assert outcome.returncode == 1 and "the preload imported vllm" in outcome.stderr


def test_the_zygote_preloads_none_of_vllm_nor_the_hub_client():
    from prebake.incontainer.programs import zygote as program
    assert not [name for name in program.PRELOAD if name.split(".")[0] in program.NOT_PRELOADED]
    assert {"vllm", "huggingface_hub", "transformers", "prebake_thinking"} <= set(program.NOT_PRELOADED)


def test_a_programs_record_key_follows_its_plugins_and_its_launcher_inputs(monkeypatch, tmp_path):
    package = tmp_path / "plugin_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("def register(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class Point:
        name, value, module, dist = "p", "plugin_pkg:register", "plugin_pkg", None

    monkeypatch.setattr(program_records.importlib.metadata, "entry_points", lambda group: [Point()])
    spec = {"pins": {"vllm": "0.27.1"}}
    before = program_records.key(spec, "thinking-controls", {"policies": {"m": 1}})
    assert program_records.key(spec, "thinking-controls", {"policies": {"m": 1}}) == before
    assert program_records.key(spec, "thinking-controls", {"policies": {"m": 2}}) != before  # the launcher's
    assert program_records.key(spec, "claude-code-sessions", {"policies": {"m": 1}}) != before
    (package / "__init__.py").write_text("def register(): print('changed')\n")
    assert program_records.key(spec, "thinking-controls", {"policies": {"m": 1}}) != before  # the plugin's files
    passed, failed = {"ok": True, "results": []}, {"ok": False, "results": []}
    assert program_records.recorded({"known_program_results": {before: passed}}, before) == passed
    assert program_records.recorded({"known_program_results": {before: failed}}, before) is None
    assert program_records.to_record(before, passed) == {"program_results": {before: passed}}
    assert program_records.to_record(before, failed) == {}  # a failure is found again, never recorded


def test_the_host_sends_recorded_program_outcomes_and_records_new_ones_per_stack_and_image_env(monkeypatch,
                                                                                                 tmp_path):
    monkeypatch.setenv("PREBAKE_STATE_DIR", str(tmp_path))
    variant = get_variant("a40", REPO / "images" / "offline")
    lock = (REPO / "images" / "offline" / variant.stack.lock).read_text()
    sent = []

    def run_in_image(client, image, spec):
        sent.append(dict(spec["known_program_results"]))
        report = [{"check": name, "ok": True, "detail": "d", "skipped": False} for name in spec["checks"]]
        if image.endswith("1"):
            report[-2]["program_results"] = {"k1": {"ok": True, "results": []}}
        return 0, report, ""

    class Images:
        def get(self, image_id):
            env = ["VLLM_PLUGINS=none"] if image_id.endswith("3") else ["TORCH_CUDA_ARCH_LIST=8.6"]
            return type("Image", (), {"attrs": {"Config": {"Env": env}}})()

    client = type("Client", (), {"images": Images()})()
    monkeypatch.setattr(selftest, "run_in_image", run_in_image)
    for image in ("1", "2", "3"):
        selftest.run(client, "sha256:" + image * 64, variant, lock, stack_image_id=STACK_ID)
    assert sent == [{}, {"k1": {"ok": True, "results": []}}, {}]  # another ENV: the programs run again
    (record,) = tmp_path.glob("selftest/programs-*.json")
    record.write_text(json.dumps({"k1": {"ok": False}}))  # never trusted: only passing outcomes are recorded
    assert selftest_record.load_program_results(record.stem.removeprefix("programs-")) == {}
