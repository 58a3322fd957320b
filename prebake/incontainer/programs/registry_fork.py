"""vLLM's model-class inspection in a fork of the program that asks, instead of a new Python.

vLLM's registry (`_run_in_subprocess`) inspects a model class in a new Python (`python -m
vllm.model_executor.models.registry`: the plugins, then the class's module) so that its own process initialises no
CUDA, and caches the answer in $VLLM_CACHE_ROOT/modelinfos; the self-test's container starts with none for what the
build did not bake (the GPU harness's models, a speculative method's draft class), so each costs a whole vLLM import
(~8 s on 2 cores, 20-40 s on a busy build machine). A fork of the program, vLLM and the plugins imported, is such a
process too: the class's module is imported in it, and only vLLM's answer comes back. The program installs it with
`registry._run_in_subprocess = inspect_in_a_fork` after importing vLLM.
"""

import os
import pickle


def inspect_in_a_fork(fn):
    """vLLM's registry._run_in_subprocess, in a fork of this process: `fn` runs in the child, its answer (or
    its error, as vLLM's own wrapper reports it) comes back pickled."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            data = pickle.dumps((True, fn()))
        except BaseException as err:  # vLLM's own wrapper reports the child's error the same way
            data = pickle.dumps((False, f"{err.__class__.__name__}: {err}"))
        with os.fdopen(write, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    ok, value = pickle.loads(data) if data else (False, "the inspecting child died")
    if not ok:
        raise RuntimeError(f"Error raised in subprocess:\n{value}")
    return value
