"""state.json for a bridge run without the launcher (prebake_testing/runstate.py) holds what the launcher decides."""

from __future__ import annotations

import json

import pytest

from entrypoint.contract import RUN_DIR_VARIABLE, read_state
from entrypoint.launcher.report import LaunchError
from prebake_testing.runstate import swapping, vllm_exited, vllm_started, write_state

POD_KEY = "rpa_" + "K" * 40
ON = {"VL_WATCHDOG": "7", "VL_IDLE_STOP": "30", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": POD_KEY,
      "RUNPOD_REST_URL": "http://127.0.0.1:9/v2", "VL_JOURNAL": "on", "VL_JOURNAL_REPO": "datasets/owner/journal",
      "HF_TOKEN": "hf_" + "t" * 34}
BRIDGE_TOPICS = ("watchdog", "journal", "idle-stop")


def test_the_state_holds_the_launchers_own_decisions(tmp_path, launcher):
    """The watchdog's seconds, the journal's and the idle stop's plans, the image's identity: as the launcher's plan."""
    plan = launcher.plan("h200_580", env=ON).plan
    run_dir = tmp_path / "run"
    bridge_env = write_state(run_dir, {**launcher.base_env("h200_580"), **ON})
    state = read_state(str(run_dir / "state.json"))
    assert bridge_env[RUN_DIR_VARIABLE] == str(run_dir) and bridge_env["RUNPOD_API_KEY"] == POD_KEY
    expected = {**plan["observe"], "run_dir": str(run_dir), "log_file": str(run_dir / "vllm.log")}
    assert state["observe"] == expected
    assert state["observe"]["watchdog_s"] == 7 and state["observe"]["journal"]["repo_id"] == "owner/journal"
    assert state["observe"]["idle_stop"] == {"after_s": 1800.0, "pod_id": "abc",
                                             "stop_url": "http://127.0.0.1:9/v2/pods/abc/action", "retry_first_s": 2.0}
    shown = [d for d in state["decisions"] if d["topic"] in BRIDGE_TOPICS]
    assert shown == [d for d in plan["decisions"] if d["topic"] in BRIDGE_TOPICS] and len(shown) == 3
    marker = json.loads(launcher.marker.read_text())
    assert state["identity"] == {key: marker[key] for key in state["identity"]} and state["identity"]["variant"]
    assert state["vllm"] == {"starts": [], "pid": None, "exit": None} and state["swapping"] is None
    assert POD_KEY not in (run_dir / "state.json").read_text()


def test_the_defaults_and_a_given_identity(tmp_path):
    write_state(tmp_path, {}, identity={"variant": "a40"})
    state = read_state(str(tmp_path / "state.json"))
    assert state["identity"] == {"variant": "a40"}
    assert state["observe"]["watchdog_s"] == 90 and state["observe"]["journal"] is None
    assert state["observe"]["idle_stop"] is None and "idle_stop" in state["observe"]  # the launcher decided: off


def test_a_value_the_launcher_refuses_is_refused_here_too(tmp_path):
    with pytest.raises(LaunchError, match="VL_WATCHDOG"):
        write_state(tmp_path, {"VL_WATCHDOG": "-1"})
    assert not (tmp_path / "state.json").exists()


def test_the_supervisors_records(tmp_path):
    with pytest.raises(FileNotFoundError, match="write_state"):
        vllm_started(tmp_path, 7)
    write_state(tmp_path)
    vllm_started(tmp_path, 7, ["vllm", "serve", "other"])
    state = read_state(str(tmp_path / "state.json"))
    assert state["vllm"]["pid"] == 7 and len(state["vllm"]["starts"]) == 1 and state["argv"][2] == "other"
    swapping(tmp_path, "qwen")
    vllm_exited(tmp_path, 3, "vLLM exited with code 3")
    state = read_state(str(tmp_path / "state.json"))
    assert state["swapping"] == "qwen" and state["vllm"]["pid"] is None
    assert state["vllm"]["exit"]["code"] == 3 and state["vllm"]["exit"]["why"] == "vLLM exited with code 3"
