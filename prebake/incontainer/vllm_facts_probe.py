"""vLLM's facts (programs/vllm_facts.py) for the vllm-facts and sleep-mode checks: read once per self-test, or
taken from the spec, where the host sends those it recorded for this stack (they depend on the stack's vLLM
and the image's environment only, like vLLM's verdicts on argvs)."""

import json
import os
import subprocess
import sys
import tempfile

from .stub_libcuda import build_stub_libcuda

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "vllm_facts.py")
_OUTCOME = {}


def facts_outcome(spec):
    """{"facts": ..., "sleep": ..., "recorded": bool}; raises RuntimeError when vLLM's facts cannot be read."""
    if _OUTCOME:
        return _OUTCOME
    known = spec.get("known_vllm_facts")
    if known:
        _OUTCOME.update(known, recorded=True)
        return _OUTCOME
    with tempfile.TemporaryDirectory() as folder:
        stub_dir, stub_note = build_stub_libcuda(folder)
        env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
        if stub_dir:
            env["LD_LIBRARY_PATH"] = stub_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        child = subprocess.run([sys.executable, PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    try:
        found = json.loads(child.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the program gave no report ({stub_note}): {child.stderr.strip()[-1200:]}") from None
    _OUTCOME.update(facts=found["facts"], sleep=found["sleep"], recorded=False)
    return _OUTCOME
