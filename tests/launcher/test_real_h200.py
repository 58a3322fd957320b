"""The launcher on the real H200 (tests/fixtures/real-h200/launcher_*) against the fake host profile."""

import dataclasses
import json
import shutil
import subprocess

from prebake_testing.hosts import REAL_H200, make_fake_nvidia_smi
from entrypoint.launcher.probe import QUERY_ARGS, parse_query


def test_fake_profile_answers_the_launcher_query_like_the_real_gpu(tmp_path):
    fake = make_fake_nvidia_smi(tmp_path, "h200_580")
    done = subprocess.run([str(fake), *QUERY_ARGS], capture_output=True, text=True, check=True)
    assert done.stdout == (REAL_H200 / "launcher_probe_query.csv").read_text()


def test_probe_parses_the_real_output_as_the_real_run_did():
    real = json.loads((REAL_H200 / "launcher_probe.json").read_text())
    parsed = dataclasses.asdict(parse_query((REAL_H200 / "launcher_probe_query.csv").read_text(), real["nvidia_smi"]))
    assert json.loads(json.dumps(parsed)) == real
    assert parsed["driver_version"] == "580.159.04" and parsed["gpus"][0]["memory_mib"] == 143771


def test_dry_run_on_the_fake_h200_matches_the_real_one(launcher):
    shutil.copy(REAL_H200 / "launcher_marker.json", launcher.marker)
    real = json.loads((REAL_H200 / "launcher_dry_run.json").read_text())
    # The real run predates the keep-alive bridge (vLLM held the exposed port itself) and had no volume.
    local = launcher.plan("h200_580", env={"VL_BRIDGE": "off", "VL_CACHE_ROOT": "off"})
    # After the capture (issue 49): Ornith's YaRN override goes into text_config.rope_parameters, where vLLM 0.27.1
    # takes it for a multimodal Qwen3.5 checkpoint (rope_scaling at the top fails there).
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}
    at = real["argv"].index("--hf-overrides") + 1
    assert json.loads(real["argv"][at]) == {"rope_scaling": yarn}
    assert json.loads(local.argv[at]) == {"text_config": {"rope_parameters": yarn}}
    assert local.argv[:at] + local.argv[at + 1:] == real["argv"][:at] + real["argv"][at + 1:]
    # What the launcher learned to do after the capture (issues 9, 11, 16, 37, 45): nothing else may differ.
    added_env = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "PREBAKE_THINKING": local.env.get("PREBAKE_THINKING"),
                 "VLLM_USE_V2_MODEL_RUNNER": "0",  # thinking budgets need vLLM's V1 runner (entrypoint/launcher/runner.py)
                 "VLLM_WORKER_MULTIPROC_METHOD": "fork"}  # issue 54: no second import of vLLM (startmethod.py)
    added_topics = {"port", "loader", "caches", "linker", "thinking-controls", "model-runner", "status", "watchdog",
                    "journal", "idle-stop", "compile-cache", "modelinfos", "start-method"}
    assert local.env == {**real["env"], **added_env}
    # the reasons' wording may change; what was decided may not
    assert [(d["topic"], d["decision"]) for d in local.plan["decisions"] if d["topic"] not in added_topics | {"bridge"}] == \
        [(d["topic"], d["decision"]) for d in real["decisions"]]
    assert local.decision("caches")[0]["decision"] == "not moved"
