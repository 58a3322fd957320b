"""Every self-test check that needs the real a40 image can fail: the toolchain checks, vLLM's argv, knobs, thinking
controls and Claude Code sessions, each condition broken in an image derived from the built one. The a40 image is
built before the run (CI does not build it: these tests are marked slow and skip when
`prebake-offline:a40-vllm0.27.1-cu13.0` is absent; docs/selftest.md has the command). The tiny image's checks:
tests/integration/test_selftest.py."""

import base64
import concurrent.futures
import json
import os

import pytest

from entrypoint.launcher.catalogue import fits_family, load_catalogue
from prebake import selftest, vllm_facts_file
from prebake.incontainer.launcher_argv import catalogue_argvs, marker_with_compat, write_hosts
from prebake_testing import REPO
from prebake_testing.hosts import write_marker  # an a40 image's marker, built without cuda-compat
from prebake_testing.selftest_runs import failed_alone, results_of, spec_of

pytestmark = pytest.mark.docker

A40_IMAGES_DIR = REPO / "images" / "offline"  # what that image was built from


# --- the real a40 image: toolchain, vLLM's parser -----------------------------------------------

def _catalogue_argvs() -> tuple[int, list[str]]:
    """What vllm-args makes: (how many argvs, the "model on host" pairs the launcher refuses).

    Every model of the catalogue the image was built with (entrypoint/models.toml: the variant's
    Dockerfile copies entrypoint/ whole) on every host profile the spec sends
    (selftest.vllm_args_spec), less the models whose weights need a newer GPU family than a host's
    (entrypoint/launcher/catalogue.py's fits_family, which the launcher's check_gpu_family applies:
    qwen38nvfp4 is Blackwell only). In the check's order: host by host, models sorted.
    test_the_expected_counts_are_what_the_launcher_makes checks that nothing else is refused.
    """
    models = load_catalogue()
    made, refused = 0, []
    for host, profile in selftest.vllm_args_spec()["hosts"].items():
        sms = [tuple(int(part) for part in gpu["compute_cap"].split(".")) for gpu in profile["gpus"]]
        for key in sorted(models):
            if fits_family(models[key], sms):
                made += 1
            else:
                refused.append(f"{key} on {host}")
    return made, refused


def test_the_expected_counts_are_what_the_launcher_makes(tmp_path):
    """_catalogue_argvs against the repository's launcher, run as the check runs the image's (its command
    line on each fake host, `launch.py --dry-run`): no image needed, so this runs where the slow tests cannot."""
    conf = dict(selftest.vllm_args_spec(), launcher=str(REPO / "entrypoint" / "launch.py"))
    smi, profiles = write_hosts(conf, str(tmp_path))
    marker = str(write_marker(tmp_path / "marker.json", None))
    base = {key: value for key, value in os.environ.items() if not key.startswith("VL_")}
    base.update(VL_NVIDIA_SMI=smi, HF_HOME=str(tmp_path / "hf-home"), VL_PREBAKED_MARKER=marker)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        jobs, refusals, _ = catalogue_argvs(conf, base, profiles, marker_with_compat(marker, str(tmp_path)), pool)
    made, refused = _catalogue_argvs()
    assert (len(jobs), [label for label, _ in refusals]) == (made, refused)
    assert all("needs Blackwell" in why for _, why in refusals)


@pytest.mark.slow
def test_the_a40_image_passes_every_check_on_vllms_own_cuda_platform(client, a40):
    # vllm-knobs is left out: the image was built with the launcher before its knob fixes.
    spec = spec_of("a40", A40_IMAGES_DIR, checks=["marker", "pins", "imports", "dependencies", "nvcc", "nvrtc",
                                                "one-cuda-release", "vllm-args"])
    status, results = results_of(client, a40, spec)
    assert status == 0, results
    detail = results["vllm-args"]["detail"]
    made, refused = _catalogue_argvs()
    assert detail.startswith(f"{made} argvs (catalogue models x host profiles)")
    if refused:  # the check lists the first six
        assert "skipped, refused by the launcher: " in detail
        assert all(f"{label}: " in detail for label in refused[:6]), detail
    assert "vLLM's own NonNvmlCudaPlatform" in detail and "stub libcuda.so.1 with" in detail


@pytest.mark.slow
def test_nvcc_fails_without_the_curand_headers(client, a40, derive):
    image = derive(a40, 'rm "$CUDA_HOME/include/curand.h"')
    detail = failed_alone(client, image, spec_of("a40", A40_IMAGES_DIR, checks=["nvcc"]), "nvcc")
    assert detail.startswith("nvcc -arch=sm_86 failed") and "curand.h" in detail


@pytest.mark.slow
def test_nvrtc_and_one_release_fail_with_builtins_of_another_release(client, a40, derive):
    # No ldconfig after the move: it would re-create libnvrtc-builtins.so.13.0 from the file's SONAME.
    image = derive(a40, 'cd "$CUDA_HOME/lib" && mv libnvrtc-builtins.so.13.0 libnvrtc-builtins.so.12.8')
    spec = spec_of("a40", A40_IMAGES_DIR, checks=["nvrtc", "one-cuda-release"])
    status, results = results_of(client, image, spec)
    assert status == 1
    assert not results["nvrtc"]["ok"] and "cannot compile cuda_fp8.h" in results["nvrtc"]["detail"]
    assert not results["one-cuda-release"]["ok"]
    assert "NVRTC builtins 12.8" in results["one-cuda-release"]["detail"]


@pytest.mark.slow
def test_one_release_fails_with_headers_of_another_release(client, a40, derive):
    image = derive(a40, 'sed -i "s/#define CUDART_VERSION  13000/#define CUDART_VERSION  12080/" '
                        '"$CUDA_HOME/include/cuda_runtime_api.h"')
    detail = failed_alone(client, image, spec_of("a40", A40_IMAGES_DIR, checks=["one-cuda-release"]),
                           "one-cuda-release")
    assert "headers (cuda_runtime_api.h) 12.8" in detail


CATALOGUE = "/opt/prebake/entrypoint/models.toml"


@pytest.mark.slow
def test_vllm_args_fails_on_an_unknown_flag_and_unknown_parser_names_in_the_catalogue(client, a40, derive):
    image = derive(a40, f"""
        sed -i 's/^tool_call_parser = "kimi_k2"/tool_call_parser = "kimi_k2x"/' {CATALOGUE}
        sed -i 's/^reasoning_parser = "nemotron_v3"/reasoning_parser = "nemotron_v3x"/' {CATALOGUE}
        printf '\\n[[models.ornith.flags]]\\nflag = "--max-num-partial-prefills"\\nvalue = "2"\\n' >> {CATALOGUE}
    """)
    detail = failed_alone(client, image, spec_of("a40", A40_IMAGES_DIR, checks=["vllm-args"]), "vllm-args")
    assert "unrecognized arguments: --max-num-partial-prefills 2" in detail
    assert "--tool-call-parser 'kimi_k2x' is not one of vLLM's tool parsers" in detail
    assert "--reasoning-parser 'nemotron_v3x' is not one of vLLM's reasoning parsers" in detail
    for host in selftest.VLLM_ARGS_HOSTS:  # each failure names the model and every host profile
        assert f"ornith on {host}" in detail and f"kimi on {host}" in detail
    assert "nemotron on h200_580" in detail
    assert "ornithfp8 on" not in detail  # the models left alone pass


@pytest.mark.slow
def test_vllm_args_fails_on_a_bad_kv_cache_dtype(client, a40):
    spec = spec_of("a40", A40_IMAGES_DIR, checks=["vllm-args"], launcher_args=["--kv-cache-dtype", "fp9"])
    detail = failed_alone(client, a40, spec, "vllm-args")
    assert "argument --kv-cache-dtype: invalid choice: 'fp9'" in detail
    assert f"({_catalogue_argvs()[0]} argvs)" in detail  # every argv the launcher makes


@pytest.mark.slow
def test_vllm_args_fails_on_an_unknown_attention_backend(client, a40):
    spec = spec_of("a40", A40_IMAGES_DIR, checks=["vllm-args"], launcher_args=["--attention-backend", "NOPE_ATTN"])
    detail = failed_alone(client, a40, spec, "vllm-args")
    assert "--attention-backend NOPE_ATTN: Unknown attention backend: 'NOPE_ATTN'" in detail


@pytest.mark.slow
def test_vllm_knobs_fails_when_a_knob_accepts_a_value_vllm_rejects(client, a40, derive):
    knobs = "/opt/prebake/entrypoint/launcher/knobs.py"
    image = derive(a40, f"""
        sed -i 's/"float16|bfloat16|float32"/"float16|bfloat16|float32|float64"/' {knobs}
        sed -i 's/one_of("float16", "bfloat16", "float32")/one_of("float16", "bfloat16", "float32", "float64")/' {knobs}
    """)
    status, results = results_of(client, image, spec_of("a40", A40_IMAGES_DIR, checks=["vllm-args", "vllm-knobs"]))
    assert status == 1 and results["vllm-args"]["ok"]
    detail = results["vllm-knobs"]["detail"]
    assert not results["vllm-knobs"]["ok"]
    assert ("[nemotron on a40x2_570 with VL_MAMBA_DTYPE=float64 (1 argvs)] "
            "argument --mamba-ssm-cache-dtype: invalid choice: 'float64'") in detail


@pytest.mark.slow
def test_thinking_controls_pass_through_the_a40_images_own_vllm(client, a40):
    status, results = results_of(client, a40, spec_of("a40", A40_IMAGES_DIR, checks=["thinking-controls"]))
    assert status == 0, results
    detail = results["thinking-controls"]["detail"]
    assert "plugin loaded" in detail and "ornith" in detail and "nemotron" in detail


def _failed_without_the_plugin(client, derive, image: str, check: str) -> str:
    """What `check` says of `image` without the prebake_thinking package (its entry point stays: vLLM's own
    behaviour comes back), asserting that it fails alone."""
    stripped = derive(image, "rm -r \"$(/opt/venv/bin/python -c 'import os, prebake_thinking as p; "
                             "print(os.path.dirname(p.__file__))')\"")
    return failed_alone(client, stripped, spec_of("a40", A40_IMAGES_DIR, checks=[check]), check)


@pytest.mark.slow
def test_thinking_controls_fail_without_the_plugin(client, a40, derive):
    # The entry point stays; vLLM's own behaviour comes back: the budget and the switch are lost.
    detail = _failed_without_the_plugin(client, derive, a40, "thinking-controls")
    assert "claude-code default: adaptive + effort high" in detail and "plugin not loaded" in detail


@pytest.mark.slow
def test_claude_code_sessions_pass_through_the_a40_images_own_vllm(client, a40):
    status, results = results_of(client, a40, spec_of("a40", A40_IMAGES_DIR, checks=["claude-code-sessions"]))
    assert status == 0, results
    assert "plugin loaded" in results["claude-code-sessions"]["detail"]


def _with_this_checkouts_facts(derive, image: str, then: str = "") -> str:
    """`image` with this checkout's vllm_facts.json and its readers (the a40 image may predate them), then `then`.
    The bridge's auth.py comes with what it imports that an older image may lack (its refusals' Response and log line,
    Claude Code's wire facts)."""
    files = ("vllm_facts.py", "vllm_facts.json", "serving/auth.py", "serving/response.py", "serving/api.py",
             "claudecode_wire.py")
    script = "".join(f"echo {base64.b64encode((REPO / 'entrypoint' / name).read_bytes()).decode()} | base64 -d "
                     f"> /opt/prebake/entrypoint/{name}\n" for name in files)
    return derive(image, script + then)


@pytest.mark.slow
def test_vllm_facts_and_sleep_mode_check_the_committed_facts_against_the_a40_images_vllm(client, a40, derive):
    assert vllm_facts_file.derive(client, a40) == {k: v for k, v in json.loads(vllm_facts_file.FILE.read_text()).items()
                                              if k != "generated_by"}  # what `./build.py vllm-facts --check` reads
    image = _with_this_checkouts_facts(derive, a40)
    checks = ["vllm-facts", "sleep-mode"]
    status, results = results_of(client, image, spec_of("a40", A40_IMAGES_DIR, checks=checks))
    assert status == 0, results
    assert results["vllm-facts"]["detail"].startswith("entrypoint/vllm_facts.json matches vLLM 0.27.1 (read from")
    assert results["sleep-mode"]["detail"].startswith("20 development endpoints of vLLM, all refused")
    # a file that lacks one (as a vLLM upgrade adding an endpoint would leave it) fails the build, twice
    stale = _with_this_checkouts_facts(derive, a40, f"{selftest.PYTHON} -c \"import json; p = '/opt/prebake/entrypoint/vllm_facts.json'; "
                          "f = json.load(open(p)); f['dev_endpoints'].remove('/collective_rpc'); "
                          "json.dump(f, open(p, 'w'))\"")
    status, results = results_of(client, stale, spec_of("a40", A40_IMAGES_DIR, checks=checks))
    assert status == 1 and not results["vllm-facts"]["ok"] and not results["sleep-mode"]["ok"]
    detail = results["vllm-facts"]["detail"]
    assert "dev_endpoints: vLLM has /collective_rpc that the file lacks" in detail
    assert "run `./build.py vllm-facts --variant a40`" in detail
    assert "/collective_rpc" in results["sleep-mode"]["detail"] and "INSIDE_ONLY" in results["sleep-mode"]["detail"]


@pytest.mark.slow
def test_claude_code_sessions_fail_without_the_plugin(client, a40, derive):
    # vLLM alone: the reminder breaks the prefix, an over-long request is a 500.
    detail = _failed_without_the_plugin(client, derive, a40, "claude-code-sessions")
    assert "prefix kept when a reminder arrives" in detail and "plugin not loaded" in detail
    assert "internal_error" in detail
