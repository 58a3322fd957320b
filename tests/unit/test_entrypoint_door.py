"""The self-test's door runs a child Python on an entrypoint package and reads its verdict (the JSON of its last
stdout line): the two checks that use it, run here on the checkout's own entrypoint, and its failures."""

from pathlib import Path

import pytest

from entrypoint.serving.auth import INSIDE_ONLY
from prebake.incontainer.checks import modelinfos, sleep_mode
from prebake.incontainer.programs.entrypoint_door import ChildFailed, run_child_json

ENTRYPOINT = Path(__file__).resolve().parent.parent.parent / "entrypoint"


def test_the_sleep_mode_probe_reads_the_bridges_refused_paths():
    assert run_child_json(str(ENTRYPOINT), sleep_mode.REFUSED, "the bridge's auth module", 60) == sorted(INSIDE_ONLY)


def test_the_modelinfos_check_runs_on_an_entrypoint_without_a_bake():
    """The checkout has no /opt/prebake/modelinfos beside its entrypoint: the check runs its child and fails by name."""
    ok, detail = modelinfos.check({"pins": {"vllm": "0.27.1"}, "bridge": str(ENTRYPOINT / "bridge.py")})
    assert not ok and "holds no model-info manifest" in detail and "step 7c" in detail


def test_a_child_that_fails_is_named_with_its_stderr():
    with pytest.raises(ChildFailed, match=r"(?s)the probe did not run \(exit 1\): .*ZeroDivisionError"):
        run_child_json(str(ENTRYPOINT), "print('{}')\n1 / 0\n", "the probe", 60)


def test_a_child_that_prints_no_json_is_named_with_its_output():
    with pytest.raises(ChildFailed, match=r"the probe did not run \(exit 0\): no stderr; its stdout ended: 'ready'"):
        run_child_json(str(ENTRYPOINT), "print('ready')\n", "the probe", 60)


def test_a_child_that_does_not_finish_is_named():
    with pytest.raises(ChildFailed, match=r"the probe did not finish in 0.5 s"):
        run_child_json(str(ENTRYPOINT), "import time\ntime.sleep(30)\n", "the probe", 0.5)


def test_a_failing_child_fails_the_check_with_the_childs_reason(tmp_path):
    """An entrypoint whose launcher module cannot be imported: the check's verdict names the module and the error."""
    broken = tmp_path / "entrypoint"
    (broken / "launcher").mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "launcher" / "__init__.py").write_text("")
    (broken / "launcher" / "catalogue.py").write_text("raise ImportError('catalogue.toml is unreadable')\n")
    ok, detail = modelinfos.check({"pins": {"vllm": "0.27.1"}, "bridge": str(broken / "bridge.py")})
    assert not ok and detail.startswith("the launcher's modelinfos module did not run (exit 1)")
    assert "catalogue.toml is unreadable" in detail
