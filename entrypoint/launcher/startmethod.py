"""How vLLM starts its engine core (and, with tensor parallelism, its workers): fork or spawn.

vLLM 0.27.1's own default is fork (vllm/envs.py), but `vllm serve` calls cli_env_setup()
(vllm/entrypoints/serve/utils/api_utils.py), which sets VLLM_WORKER_MULTIPROC_METHOD=spawn whenever the
variable is unset, and says so only at debug level. A spawned engine core starts a new interpreter that
imports vLLM, torch and the `vllm` script again before its set-up: on a new pod that is time the user
waits through (docs/measurements.md, "A new pod's start"). Fork gives the engine core the API server's
imports for free. vLLM still switches to spawn by itself, with a warning, where fork is unsafe: CUDA
already initialised in the parent, a Ray actor, WSL, and `--numa-bind` (vllm/utils/system_utils.py,
_maybe_force_spawn); the launcher asks for spawn itself where NUMA binding is on, so that the plan says
what runs.
"""

from __future__ import annotations

from typing import Mapping

from .report import Decision, LaunchError

ENV = "VLLM_WORKER_MULTIPROC_METHOD"
TOPIC = "start-method"
CHOICES = ("fork", "spawn")  # vllm/envs.py: env_with_choices(..., ["spawn", "fork"]); anything else raises there


def decide_start_method(env: Mapping[str, str], numa_bind: bool) -> tuple[str | None, Decision]:
    """(the value the launcher gives VLLM_WORKER_MULTIPROC_METHOD, None to leave the user's; the decision)."""
    chosen = env.get(ENV)
    if chosen is not None:
        if chosen not in CHOICES:
            raise LaunchError(subject=ENV, value=chosen,
                              problem=f"{ENV}={chosen!r}: vLLM 0.27.1 accepts only {' or '.join(CHOICES)} "
                                      "(vllm/envs.py)",
                              fix="unset it to let the launcher choose (fork, or spawn with VL_NUMA=on).")
        return None, Decision(TOPIC, f"{chosen} ({ENV} in the environment)",
                              "set by you" + ("; vLLM still switches to spawn, with a warning, where CUDA is "
                                              "initialised or --numa-bind is given" if chosen == "fork" else ""))
    if numa_bind:
        return "spawn", Decision(TOPIC, "spawn", "NUMA binding (--numa-bind) re-executes each worker under "
                                                 "numactl, which only a spawned process can do "
                                                 "(vllm/utils/numa_utils.py)")
    return "fork", Decision(TOPIC, "fork", "the engine core inherits the API server's imports (vLLM, torch) "
                                           "instead of importing them again in a spawned interpreter, which "
                                           "`vllm serve` would choose when the variable is unset; vLLM still "
                                           "switches to spawn, with a warning, if CUDA was initialised first")
