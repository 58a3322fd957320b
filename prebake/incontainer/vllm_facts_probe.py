"""vLLM's facts (programs/vllm_facts_derive.py) for the vllm-facts and sleep-mode checks: read once per self-test, or
taken from the spec, where the host sends those it recorded for this stack (they depend on the stack's vLLM
and the image's environment only, like vLLM's verdicts on argvs)."""

import json
import os
import threading

from . import vllm_programs

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "vllm_facts_derive.py")
_OUTCOME = {}
_ONCE = threading.Lock()  # vllm-facts and sleep-mode run side by side (run.py): one reading for both


def facts_outcome(spec):
    """{"facts": ..., "sleep": ..., "recorded": bool}; raises RuntimeError when vLLM's facts cannot be read."""
    with _ONCE:
        return _facts_outcome(spec)


def _facts_outcome(spec):
    if _OUTCOME:
        return _OUTCOME
    known = spec.get("known_vllm_facts")
    if known:
        _OUTCOME.update(known, recorded=True)
        return _OUTCOME
    child = vllm_programs.run(PROGRAM)
    try:
        found = json.loads(child.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the program gave no report ({child.note}): {child.stderr.strip()[-1200:]}") from None
    _OUTCOME.update(facts=found["facts"], sleep=found["sleep"], recorded=False)
    return _OUTCOME
