"""vLLM's engine-core start method (entrypoint/launcher/startmethod.py), through the real launcher command line."""


def test_the_launcher_asks_for_fork_and_says_why(launcher):
    plan = launcher.plan("h200_580")
    assert plan.env["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"
    [decision] = plan.decision("start-method")
    assert decision["decision"] == "fork" and "imports" in decision["why"]


def test_numa_binding_asks_for_spawn(launcher):
    # vLLM re-executes each worker under numactl, which needs spawn (vllm/utils/numa_utils.py)
    by_knob = launcher.plan("a40x2_570", env={"VL_NUMA": "on"})
    assert by_knob.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    by_argument = launcher.plan("a40x2_570", args=["--numa-bind"])
    assert by_argument.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert by_argument.decision("start-method")[0]["decision"] == "spawn"


def test_the_users_choice_is_kept_and_said(launcher):
    plan = launcher.plan("h200_580", env={"VLLM_WORKER_MULTIPROC_METHOD": "spawn"})
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in plan.env  # unchanged: the plan lists only what it changes
    assert plan.decision("start-method")[0]["decision"] == "spawn (VLLM_WORKER_MULTIPROC_METHOD in the environment)"


def test_a_value_vllm_refuses_stops_the_start_naming_the_variable(launcher):
    result = launcher.run("h200_580", env={"VLLM_WORKER_MULTIPROC_METHOD": "forkserver"})
    assert result.rc == 2
    assert "VLLM_WORKER_MULTIPROC_METHOD='forkserver'" in result.stderr and "fork or spawn" in result.stderr
    assert result.stdout == ""
