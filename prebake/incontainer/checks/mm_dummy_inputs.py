"""mm-dummy-inputs: every multimodal catalogue model's processor builds the dummy inputs vLLM's engine profiles with.

A pod's vLLM, before it serves, runs its memory profile: the GPU model runner feeds the vision tower a dummy image,
made by the model's processor through the processor-only cache of its encoder budget. Nothing else in a build
reaches that path, and a transformers release that refused it (5.23.0 and later) stopped every pod's start
(issue 55); so would a request whose image the API server's cache holds. The program (programs/mm_dummy_inputs.py)
runs both with the image's vLLM and transformers on the launcher's own argv for a host of the variant's GPU, with
each model's scaled folder (config, tokenizer, processor files: benchmarks/gpu/catalogue_configs.py, sent in the
spec). Its passing outcome is kept under the stack, the
plugins and these inputs (program_records.py).
"""

import json
import os
import tempfile

from .. import program_records, vllm_programs
from ..common import VARIANT, Skipped
from ..launcher_argv import catalogue, launcher_package, marker_with_compat, write_hosts
from ..programs.entrypoint_door import image_module

NAME = "mm-dummy-inputs"
LEVEL = VARIANT  # the catalogue and the launcher are the variant's
USES_VLLM_PROGRAMS = True
PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "programs", "mm_dummy_inputs.py")
PLAN_ENV = "VLLM_"  # the plan's variables vLLM reads while it builds its config
PLAN_ENV_SKIPPED = ("VLLM_CACHE_ROOT",)  # a path of the pod's, which the program sets itself


def host_of(spec) -> tuple[str, dict]:
    """The host profile the check plans on: one of the vllm-args profiles whose GPUs are the variant's
    (cuda_arch), the fewest GPUs first. Raises ValueError naming the profiles when none is."""
    hosts = spec["vllm_args"]["hosts"]
    fitting = [(len(profile["gpus"]), name) for name, profile in hosts.items()
               if profile["gpus"] and all(gpu["compute_cap"] == spec["cuda_arch"] for gpu in profile["gpus"])]
    if not fitting:
        raise ValueError(f"no host profile with the variant's GPUs (compute capability {spec['cuda_arch']}) among "
                         f"{', '.join(hosts)}: add one to prebake/selftest.py VLLM_ARGS_HOSTS")
    name = min(fitting)[1]
    gpu = hosts[name]["gpus"][0]
    major, minor = (int(part) for part in gpu["compute_cap"].split("."))
    return name, {"name": gpu["name"], "capability": [major, minor]}


def plans(spec, host_name: str, folder: str) -> list[dict]:
    """Each catalogue model's `vllm serve` argv and VLLM_* variables from the image's launcher on the host (its
    make_plan, what --dry-run prints), or the launcher's refusal."""
    conf = spec["vllm_args"]
    smi, profiles = write_hosts(conf, folder)
    compat_marker = marker_with_compat(spec["marker"], folder)
    entrypoint_dir = os.path.dirname(conf["launcher"])
    launch = launcher_package(conf["launcher"])[1]
    architectures = {key: model.architecture
                     for key, model in image_module(entrypoint_dir, "launcher.catalogue").load_catalogue().items()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("VL_")}
    env.update(VL_NVIDIA_SMI=smi, FAKE_NVIDIA_SMI_HOST=profiles[host_name], HF_HOME=os.path.join(folder, "hf-home"),
               VL_PREBAKED_MARKER=spec["marker"], VL_SWAP="off")
    found = []
    for key in catalogue(conf["launcher"]):
        model = {"key": key, "architecture": architectures.get(key), "argv": None, "env": {}, "refusal": None}
        for marker in (spec["marker"], compat_marker):
            if marker is None:
                continue
            try:
                plan = launch.make_plan(dict(env, VL_MODEL=key, VL_PREBAKED_MARKER=marker),
                                        list(conf.get("launcher_args", [])))
            except launch.LaunchError as err:
                model["refusal"] = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
                if "compatibility libraries" in str(err):
                    continue  # an image built --without cuda-compat: the argv a variant built with it gives
                break
            model.update(argv=list(plan.argv), refusal=None,
                         env={k: v for k, v in sorted(plan.env_changes.items())
                              if k.startswith(PLAN_ENV) and k not in PLAN_ENV_SKIPPED})
            break
        found.append(model)
    return found


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm")
    try:
        host_name, host = host_of(spec)
    except ValueError as err:
        return False, str(err)
    files = spec.get("mm_models") or {}
    with tempfile.TemporaryDirectory() as folder:
        models = [dict(model, files=files.get(model["key"])) for model in plans(spec, host_name, folder)]
        inputs = {"host": host, "models": models}
        record_key = program_records.key(spec, NAME, inputs)
        report = program_records.recorded(spec, record_key)
        how = " (vLLM's outcome recorded for this stack, plugins and these inputs)" if report else ""
        if report is None:
            jobs = os.path.join(folder, "jobs.json")
            with open(jobs, "w", encoding="utf-8") as f:
                json.dump({"entrypoint": os.path.dirname(spec["vllm_args"]["launcher"]), **inputs}, f)
            child = vllm_programs.run(PROGRAM, [jobs], env={"HF_HUB_OFFLINE": "1"})
            try:
                report = json.loads(child.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                return False, f"the program gave no report ({child.note}): {child.stderr.strip()[-1500:]}"
    ok, detail = verdict(report, host_name, how)
    return ok, detail, program_records.to_record(record_key, report)


def verdict(report, host_name: str, how: str = "") -> tuple[bool, str]:
    checked = [r for r in report["results"] if not r.get("skipped")]
    failed = [f"{r['key']}: {r['detail']}" for r in checked if not r["ok"]]
    skipped = [f"{r['key']} ({r['skipped']})" for r in report["results"] if r.get("skipped")]
    tail = (f"; not checked: {', '.join(skipped)}" if skipped else "") + \
        (f"; text-only: {', '.join(report['text_only'])}" if report["text_only"] else "")
    if failed:
        return False, (f"{len(failed)} of {len(checked)} multimodal models fail vLLM's dummy-input profile on "
                       f"{host_name} with transformers {report['transformers']} (a pod's start would die there): "
                       + " | ".join(failed) + tail)
    if not checked:
        return True, f"no multimodal catalogue model to check on {host_name}{tail}"
    first = checked[0]["detail"]
    each = ", ".join(f"{r['key']} {r['seconds']:.1f} s" for r in checked)
    return True, (f"{len(checked)} multimodal models ({each}) on {host_name}, transformers {report['transformers']}: "
                  f"{first}{tail}{how}")
