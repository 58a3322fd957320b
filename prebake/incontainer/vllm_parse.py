"""Both vLLM checks' argvs, parsed by the image's own vLLM in one child process, shared by the two."""

import concurrent.futures
import json
import os
import tempfile
import threading
import time

from . import vllm_programs
from .launcher_argv import catalogue_argvs, knob_argvs, marker_with_compat, write_hosts

SERVE_PARSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "serve_parser.py")


def parse_with_vllm(jobs, folder):
    """Parse every argv in ONE child of the vLLM programs' zygote (vllm_programs.py), with the stub
    libcuda.so.1 on its LD_LIBRARY_PATH. Returns the child's outcome, or raises RuntimeError."""
    jobs_path, result_path = os.path.join(folder, "jobs.json"), os.path.join(folder, "results.json")
    with open(jobs_path, "w") as f:
        json.dump(jobs, f)
    child = vllm_programs.run(SERVE_PARSER, [jobs_path, result_path])
    if child.returncode != 0 or not os.path.exists(result_path):
        raise RuntimeError(f"vLLM's serve parser could not be built ({child.note}): {child.stderr.strip()[-1200:]}")
    with open(result_path) as f:
        outcome = json.load(f)
    outcome["stub"] = child.note
    return outcome


_VLLM_OUTCOME = {}  # vllm-args computes, vllm-knobs reads: one vLLM import for both
_ONCE = threading.Lock()  # the checks run side by side (run.py): the second waits for the first's outcome


def vllm_outcome(spec):
    """Make the argvs of both checks, parse them all with vLLM once, and split the results."""
    with _ONCE:
        return _vllm_outcome(spec)


def _vllm_outcome(spec):
    if _VLLM_OUTCOME:
        return _VLLM_OUTCOME
    conf = spec["vllm_args"]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        smi, profiles = write_hosts(conf, folder)
        compat_marker = marker_with_compat(spec["marker"], folder)
        base = {k: v for k, v in os.environ.items() if not k.startswith("VL_")}
        # An empty HF cache (no offline switch from stray weights), the image's own marker.
        base.update(VL_NVIDIA_SMI=smi, HF_HOME=os.path.join(folder, "hf-home"), VL_PREBAKED_MARKER=spec["marker"])
        # Each model alone: a variant's VL_SWAP (blackwell's) would refuse every host its set cannot run on,
        # and a set's members are catalogue models this sweep plans anyway.
        base["VL_SWAP"] = "off"
        with concurrent.futures.ThreadPoolExecutor(max(4, min(16, 2 * (os.cpu_count() or 2)))) as pool:
            catalogue, refusals, compat_hosts = catalogue_argvs(conf, base, profiles, compat_marker, pool,
                                                                     folder)
            knobs, settings, refused, crashes = [], 0, 0, []
            host = conf.get("knob_host")
            if "vllm-knobs" in spec["checks"] and host in profiles:
                env = dict(base, FAKE_NVIDIA_SMI_HOST=profiles[host])
                if host in compat_hosts:
                    env["VL_PREBAKED_MARKER"] = compat_marker
                knobs, settings, refused, crashes = knob_argvs(conf, env, pool, folder)
        seen, unique = set(), []
        for job in catalogue + knobs:  # a knob setting that changes nothing is parsed once, as catalogue
            key = json.dumps(job["argv"])
            if key not in seen:
                seen.add(key)
                unique.append(job)
        made = time.monotonic() - started
        # vLLM's verdict on an argv depends on the stack's vLLM, not on the launcher that made it:
        # the host sends those it recorded for this stack (selftest_record), and only new argvs
        # are parsed (none, after an entrypoint-only change: no stub, no vLLM import).
        known = spec.get("known_verdicts") or {}
        todo = [job for job in unique if json.dumps(job["argv"]) not in known]
        outcome = parse_with_vllm(todo, folder) if todo else {"results": [], "stub": "not needed"}
        outcome["launcher_seconds"] = round(made, 1)
        outcome["child_seconds"] = round(time.monotonic() - started - made, 1)
    # by argv: a knob setting that gives the same argv as another shares its verdict
    new_verdicts = {json.dumps(job["argv"]): item["error"] for job, item in zip(todo, outcome["results"])}
    errors = {key: known[key] for key in (json.dumps(job["argv"]) for job in unique) if key in known}
    errors.update(new_verdicts)
    _VLLM_OUTCOME.update(outcome=outcome, errors=errors, catalogue=catalogue, refusals=refusals,
                         compat_hosts=compat_hosts, knobs=knobs, settings=settings, refused=refused, crashes=crashes,
                         knob_host=conf.get("knob_host"), parsed=len(unique), recorded=len(unique) - len(todo),
                         new_verdicts=new_verdicts)
    return _VLLM_OUTCOME


def rejections(jobs, errors):
    """vLLM's rejections of `jobs`, grouped by message, each naming the model, host (and knob)."""
    failures = {}
    for job in jobs:
        error = errors.get(json.dumps(job["argv"]))
        if error:
            failures.setdefault(error, []).append(job["label"])
    return [f"[{', '.join(labels[:6])}{' ...' if len(labels) > 6 else ''} ({len(labels)} argvs)] "
            f"{error if len(error) < 500 else error[:500] + '...'}" for error, labels in failures.items()]
