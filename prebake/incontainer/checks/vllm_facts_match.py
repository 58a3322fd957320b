"""vllm-facts: entrypoint/vllm_facts.json, what the launcher and the bridge know of vLLM, is what the image's vLLM
says (programs/vllm_facts_derive.py reads it from vLLM's own objects; `./build.py vllm-facts` writes the file)."""

import os

from ..common import VARIANT, Skipped
from ..programs.entrypoint_door import vllm_facts, vllm_facts_path
from ..vllm_facts_probe import facts_outcome

NAME = "vllm-facts"
LEVEL = VARIANT  # the file is in the entrypoint's layer; vLLM's side is recorded per stack
USES_VLLM_PROGRAMS = True  # when vLLM has no recorded answer (vllm_programs.py)


def differences(committed, derived):
    """One line per fact the file states otherwise than vLLM (the host's `./build.py vllm-facts --check` too)."""
    found = []
    for key, value in derived.items():
        have = committed.get(key)
        if have == value:
            continue
        if isinstance(value, list) and isinstance(have, list):
            found.append(f"{key}: vLLM has {', '.join(sorted(set(value) - set(have))) or 'nothing'} that the file "
                         f"lacks, the file has {', '.join(sorted(set(have) - set(value))) or 'nothing'} that vLLM lacks")
        elif isinstance(value, dict) and isinstance(have, dict):
            changed = sorted(k for k in set(value) | set(have) if value.get(k, "absent") != have.get(k, "absent"))
            found.append(f"{key}: " + ", ".join(f"{k} ({have.get(k, 'absent')} in the file, {value.get(k, 'absent')} "
                                                 "in vLLM)" for k in changed[:8]) + (" ..." if len(changed) > 8 else ""))
        else:
            found.append(f"{key}: {have!r} in the file, {value!r} in the image's vLLM")
    return found


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm to read the facts from")
    outcome = facts_outcome(spec)
    facts = outcome["facts"]
    record = {"vllm_facts": {"facts": facts, "sleep": outcome["sleep"]}}  # for the host to record for this stack
    how = "recorded for this stack" if outcome["recorded"] else "read from vLLM's serve parser, enums and routers"
    if "bridge" not in spec:  # `./build.py vllm-facts`: only the facts
        return True, f"vLLM {facts['vllm']}'s facts ({how})", record
    path = vllm_facts_path(os.path.dirname(spec["bridge"]))
    regenerate = (f"run `./build.py vllm-facts --variant {spec['variant']}` (with this build's options) and commit "
                  "entrypoint/vllm_facts.json")
    try:
        committed = vllm_facts(os.path.dirname(spec["bridge"]))
    except (OSError, ValueError) as e:
        return False, f"{path} (entrypoint/vllm_facts.json) is missing or not JSON: {e}; {regenerate}", record
    found = differences(committed, facts)
    if found:
        return False, (f"entrypoint/vllm_facts.json does not match this image's vLLM {facts['vllm']}: "
                       + "; ".join(found) + f"; {regenerate}"), record
    return True, (f"entrypoint/vllm_facts.json matches vLLM {facts['vllm']} ({how}): "
                  f"{len(facts['attention_backends'])} attention, {len(facts['moe_backends'])} MoE and "
                  f"{len(facts['linear_backends'])} linear backends, {len(facts['serve_options'])} serve options, "
                  f"{len(facts['dev_endpoints'])} development endpoints"), record
