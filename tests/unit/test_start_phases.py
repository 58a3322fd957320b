"""The GPU harness's phase table of a pod's start, read from vLLM's log lines (benchmarks/gpu/start_phases.py)."""

import time

from benchmarks.gpu import start_phases

LAUNCHED = time.mktime((2026, 12, 4, 22, 0, 0, 0, 0, -1))  # the launcher's start, local time as vLLM stamps
# vLLM 0.27.1's own lines (their format strings), with the prefixes its processes add
LOG = """\
some launcher-free output without a stamp
(APIServer pid=81) INFO 12-04 22:00:16 [utils.py:330] non-default args: {'model': 'tiny/m8b'}
(APIServer pid=81) INFO 12-04 22:00:38 [model.py:612] Resolved architecture: Qwen3ForCausalLM
(APIServer pid=81) INFO 12-04 22:00:39 [model.py:1800] Using max model len 4096
(EngineCore pid=160) INFO 12-04 22:00:52 [core.py:101] Initializing a V1 LLM engine (v0.27.1)
(EngineCore pid=160) INFO 12-04 22:00:54 [gpu_model_runner.py:4100] Model loading took 15.3 GiB memory and 1.2 seconds
(EngineCore pid=160) INFO 12-04 22:00:56 [decorators.py:570] Directly load AOT compilation from path /c/model
(EngineCore pid=160) INFO 12-04 22:01:12 [core.py:250] init engine (profile, create kv cache, warmup model) took 17.0 seconds
(APIServer pid=81) INFO 12-04 22:01:16 [api_server.py:682] Starting vLLM server on http://127.0.0.1:8000
"""


def test_milestones_are_seconds_from_the_launchers_start():
    marks = start_phases.milestones(LOG, LAUNCHED)
    assert marks == {"imports": 16.0, "architecture": 38.0, "API server set-up": None, "engine core imports": 52.0,
                     "weights": 54.0, "compile": 56.0, "profiling and graphs": 72.0, "server ready": 76.0}


def test_the_engine_cores_start_read_from_proc_splits_set_up_from_its_imports():
    # vLLM logs nothing when it starts the engine core: the harness reads the process's start from /proc
    marks = start_phases.milestones(LOG, LAUNCHED, {"API server set-up": LAUNCHED + 41.5})
    found = start_phases.phases(marks, 84.7)
    assert found["API server set-up"] == 3.5 and found["engine core imports"] == 10.5


def test_phases_run_from_the_previous_milestone_found():
    marks = start_phases.milestones(LOG.replace("Model loading took", "Model loaded"), LAUNCHED)
    found = start_phases.phases(marks, 84.7)
    assert found["imports"] == 16.0 and found["architecture"] == 22.0 and found["engine core imports"] == 14.0
    assert found["weights"] is None and found["compile"] == 4.0  # from the engine's first line: weights not found
    assert found["first token"] == 8.7 and found["total to first token"] == 84.7


def test_the_table_gives_the_median_of_the_runs_per_pod():
    def run(first_token):
        pod = {"phases": start_phases.phases(start_phases.milestones(LOG, LAUNCHED), first_token)}
        return {"model": "tiny/m8b", "cold": pod, "restored": pod}
    text = start_phases.table([run(80.0), run(90.0), run(100.0)])
    assert "| first token | 14.0 s (3) | 14.0 s (3) |" in text
    assert "| total to first token | 90.0 s (3) | 90.0 s (3) |" in text
    assert "| architecture | 22.0 s (3) |" in text


def test_several_pods_of_one_kind_in_a_run_each_count_once():
    def pod(first_token):
        return {"phases": start_phases.phases(start_phases.milestones(LOG, LAUNCHED), first_token)}
    run = {"model": "tiny/m8b", "cold": pod(100.0), "restored": pod(60.0), "restored#2": pod(64.0),
           "restored#3": pod(70.0), "restored-spawn": pod(75.0), "restored-spawn#2": pod(77.0)}
    text = start_phases.table([run])
    assert text.splitlines()[0] == "| phase | cold | restored | restored-spawn |"
    assert "| total to first token | 100.0 s (1) | 64.0 s (3) | 76.0 s (2) |" in text
