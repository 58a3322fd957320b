"""The self-test's checks, run INSIDE a freshly built image (stdlib only, no GPU needed).

`prebake.selftest` sends this file to the image's Python with a JSON spec as its argument and
reads back one JSON report: [{"check": ..., "ok": bool, "detail": ...}, ...].
Each check names a failure the bootstrap script met on a real pod (docs/selftest.md).
"""

import concurrent.futures
import ctypes
import glob
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata

MARKER_KEYS = ("schema", "variant", "cuda", "python", "base_image", "stack_image", "revision", "created",
               "cuda_arch", "cuda_compat_dir", "launch_defaults")

KERNEL = r"""
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <curand_kernel.h>
#include <cuda_fp8.h>
__global__ void prebake_selftest(float *out, cuda::std::uint64_t seed) {
    curandStatePhilox4_32_10_t state;
    curand_init(seed, threadIdx.x, 0, &state);
    __nv_fp8_e4m3 v(curand_uniform(&state));
    out[threadIdx.x] = float(v);
}
"""
NVRTC_PROGRAM = r"""
#include <cuda_fp8.h>
extern "C" __global__ void prebake_nvrtc(float *out) { __nv_fp8_e5m2 v(1.5f); out[0] = float(v); }
"""


class Skipped(Exception):
    """A check that does not apply to this image: reported as skipped, with the reason."""


def check_marker(spec):
    path = spec["marker"]
    try:
        with open(path, encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError) as e:
        return False, f"{path} is missing or not JSON: {e}"
    missing = [k for k in MARKER_KEYS if k not in marker or marker[k] in ("", "unknown")]
    missing = [k for k in missing if not (k == "cuda_compat_dir" and k in marker)]  # null = not baked
    for name in ("vllm", "torch"):
        if name in spec["pins"] and not marker.get(name):
            missing.append(name)
    if missing:
        return False, f"{path} lacks {', '.join(missing)}"
    if marker["variant"] != spec["variant"]:
        return False, f"{path} says variant {marker['variant']!r}, expected {spec['variant']!r}"
    for name in ("vllm", "torch"):
        if name in spec["pins"] and marker[name] != spec["pins"][name]:
            return False, f"{path} records {name} {marker[name]}, the lock pins {spec['pins'][name]}"
    return True, f"{path}: variant {marker['variant']}, vllm {marker.get('vllm')}, torch {marker.get('torch')}"


def check_pins(spec):
    wrong = []
    for name, pinned in sorted(spec["pins"].items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} is not installed (lock: {pinned})")
            continue
        if installed != pinned:
            wrong.append(f"{name} {installed} installed, lock pins {pinned}")
    if wrong:
        return False, "; ".join(wrong)
    return True, f"{len(spec['pins'])} packages at their locked versions"


def check_imports(spec):
    failed = []
    for module in spec["imports"]:
        try:
            importlib.import_module(module)
        except Exception as e:  # any import-time failure is the finding
            failed.append(f"{module}: {e.__class__.__name__}: {e}")
    if failed:
        return False, "; ".join(failed)
    return True, "imported " + ", ".join(spec["imports"])


def check_dependencies(spec):
    result = subprocess.run(["uv", "pip", "check", "--python", sys.executable], capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0, output.splitlines()[-1] if output else "no output"


def _cuda_home():
    home = os.environ.get("CUDA_HOME", "")
    if not home or not os.path.isdir(home):
        raise RuntimeError(f"CUDA_HOME={home!r} is not a folder")
    return home


def check_nvcc(spec):
    home = _cuda_home()
    arch = spec["cuda_arch"].replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.cu")
        with open(source, "w") as f:
            f.write(KERNEL)
        command = [os.path.join(home, "bin", "nvcc"), f"-arch=sm_{arch}", "-c", source, "-o",
                   os.path.join(tmp, "kernel.o")]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return False, f"nvcc -arch=sm_{arch} failed: {(result.stderr or result.stdout).strip()[-800:]}"
    return True, f"nvcc compiled a curand + cuda_fp8.h + CCCL kernel for sm_{arch}"


def _nvrtc():
    libs = sorted(glob.glob(os.path.join(_cuda_home(), "lib", "libnvrtc.so.*")))
    libs = [p for p in libs if "builtins" not in p]
    if not libs:
        raise RuntimeError("no libnvrtc.so.* under $CUDA_HOME/lib")
    return ctypes.CDLL(libs[0]), libs[0]


def check_nvrtc(spec):
    nvrtc, path = _nvrtc()
    program = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(program), NVRTC_PROGRAM.encode(), b"selftest.cu", 0, None, None):
        return False, "nvrtcCreateProgram failed"
    arch = spec["cuda_arch"].replace(".", "")
    options = [f"--include-path={_cuda_home()}/include".encode(), f"-arch=compute_{arch}".encode()]
    array = (ctypes.c_char_p * len(options))(*options)
    status = nvrtc.nvrtcCompileProgram(program, len(options), array)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    if status != 0:
        return False, f"NVRTC ({path}) cannot compile cuda_fp8.h: {log.value.decode(errors='replace')[-800:]}"
    return True, f"NVRTC ({os.path.basename(path)}) compiled a cuda_fp8.h program for compute_{arch}"


def _header_release(path, macro):
    with open(path) as f:
        match = re.search(rf"#define\s+{macro}\s+(\d+)", f.read())
    if not match:
        raise RuntimeError(f"{macro} not found in {path}")
    number = int(match[1])
    return f"{number // 1000}.{number % 1000 // 10}"


def check_one_release(spec):
    home = _cuda_home()
    nvrtc, path = _nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    releases = {"NVRTC": f"{major.value}.{minor.value}"}
    builtins = glob.glob(os.path.join(home, "lib", "libnvrtc-builtins.so.*.*"))
    if not builtins:
        return False, "libnvrtc-builtins.so is missing (NVRTC: 'failed to open libnvrtc-builtins')"
    releases["NVRTC builtins"] = re.search(r"\.so\.(\d+\.\d+)", builtins[0])[1]
    cudart = ctypes.CDLL(sorted(glob.glob(os.path.join(home, "lib", "libcudart.so.*")))[0])
    version = ctypes.c_int()
    cudart.cudaRuntimeGetVersion(ctypes.byref(version))
    releases["libcudart"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
    releases["headers (cuda_runtime_api.h)"] = _header_release(os.path.join(home, "include", "cuda_runtime_api.h"),
                                                                "CUDART_VERSION")
    nvcc = subprocess.run([os.path.join(home, "bin", "nvcc"), "--version"], capture_output=True, text=True).stdout
    releases["nvcc"] = re.search(r"release (\d+\.\d+)", nvcc)[1]
    summary = ", ".join(f"{k} {v}" for k, v in releases.items())
    if set(releases.values()) != {spec["cuda"]}:
        return False, f"not one CUDA release (the stack's is {spec['cuda']}): {summary}"
    try:
        ctypes.CDLL(os.path.basename(builtins[0]))  # found by the loader, as NVRTC's own dlopen needs
    except OSError as e:
        return False, f"{os.path.basename(builtins[0])} is not on the loader path: {e}"
    return True, summary

# --- vllm-args: every argv the image's launcher produces is accepted by the image's vLLM -----------

# Run in ONE child process (importing vLLM costs ~8 s), with the stub libcuda.so.1 (if any) on
# LD_LIBRARY_PATH for that process only. argv: JOBS.json RESULT.json. Each job: {"label", "argv"}.
PARSE_SCRIPT = r"""
import contextlib, io, json, sys, time
started = time.time()
with open(sys.argv[1]) as f:
    jobs = json.load(f)

# vLLM builds the `vllm serve` parser only on a known platform: EngineArgs.add_cli_args calls each
# config's default factory, and DeviceConfig() raises "Failed to infer device type" on
# UnspecifiedPlatform. vLLM detects CUDA through NVML (nvmlInit, then a GPU count > 0), which a
# build machine has neither the library nor a GPU for, and no variable forces the platform. But
# vllm.platforms lets `current_platform` be assigned (its module __setattr__), so the check sets
# it to vLLM's OWN CUDA platform class, and does so before anything imports
# vllm.engine.arg_utils, which binds the name at import. Importing vllm.platforms.cuda loads
# vllm._C_stable_libtorch, which needs libcuda.so.1, the driver's library, present only on a GPU
# host: the stub built by the self-test stands in for it (every entry point returns
# CUDA_ERROR_STUB_LIBRARY; nothing calls it while parsing). Without the stub, a Platform subclass
# that declares device_type "cuda" stands in: parsing reads nothing else from the platform.
import vllm.platforms as platforms
try:
    from vllm.platforms.cuda import CudaPlatform as platform_class
    platform_note = "vLLM's own " + platform_class.__name__
except Exception as err:
    from vllm.platforms.interface import Platform, PlatformEnum

    class platform_class(Platform):
        _enum = PlatformEnum.CUDA
        device_name = device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"
    platform_note = "a stand-in CUDA Platform (vllm.platforms.cuda did not import: %s: %s)" % (
        type(err).__name__, str(err)[:200])
platforms.current_platform = platform_class()

import vllm.engine.arg_utils as arg_utils
from vllm.config.attention import AttentionConfig
from vllm.config.mamba import MambaBackendEnum
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.openai.api_server import validate_api_server_args
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser

if arg_utils.current_platform is not platforms.current_platform:
    raise SystemExit("vllm.engine.arg_utils was imported before the platform was set")

# The parser `vllm serve` builds (vllm/entrypoints/cli/main.py: a FlexibleArgumentParser with
# the serve subcommand's make_arg_parser).
top = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand()
serve.subparser_init(top.add_subparsers(required=False, dest="subparser"))
built = time.time()
tool_parsers = set(ToolParserManager.list_registered())
reasoning_parsers = set(ReasoningParserManager.list_registered())
loaded = {}


def parser_class(kind, manager, getter, name):
    # The registries name parsers lazily; loading the class also proves its module imports here.
    key = (kind, name)
    if key not in loaded:
        try:
            getattr(manager, getter)(name)
            loaded[key] = None
        except Exception as err:
            loaded[key] = "%s %r is registered but does not load: %s: %s" % (kind, name, type(err).__name__, err)
    return loaded[key]


def check(argv):
    if argv[:2] != ["vllm", "serve"]:
        return "the argv does not start with 'vllm serve': %r" % argv[:2]
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = top.parse_args(argv[1:])
    except SystemExit:
        errors = [line.split("error: ", 1)[1] for line in captured.getvalue().splitlines() if "error: " in line]
        return errors[-1] if errors else captured.getvalue().strip()[-600:]
    if getattr(args, "model_tag", None) is not None:  # what ServeSubcommand.cmd does first
        args.model = args.model_tag
    # Argparse has no choices for the parser names; vLLM checks them only when the server starts.
    if args.tool_call_parser is not None:
        if args.tool_call_parser not in tool_parsers:
            return "--tool-call-parser %r is not one of vLLM's tool parsers (%s)" % (
                args.tool_call_parser, ", ".join(sorted(tool_parsers)))
        problem = parser_class("--tool-call-parser", ToolParserManager, "get_tool_parser", args.tool_call_parser)
        if problem:
            return problem
    if args.reasoning_parser:
        if args.reasoning_parser not in reasoning_parsers:
            return "--reasoning-parser %r is not one of vLLM's reasoning parsers (%s)" % (
                args.reasoning_parser, ", ".join(sorted(reasoning_parsers)))
        problem = parser_class("--reasoning-parser", ReasoningParserManager, "get_reasoning_parser",
                               args.reasoning_parser)
        if problem:
            return problem
    # The conversions EngineArgs.create_engine_config applies to these two.
    try:
        if isinstance(args.attention_backend, str):
            AttentionConfig.validate_backend_before(args.attention_backend)
    except (KeyError, ValueError) as err:
        return "--attention-backend %s: %s" % (args.attention_backend, err)
    try:
        if isinstance(args.mamba_backend, str):
            MambaBackendEnum[args.mamba_backend.upper()]
    except (KeyError, ValueError) as err:
        return "--mamba-backend %s: %s" % (args.mamba_backend, err)
    try:
        serve.validate(args)               # validate_parsed_serve_args: what `vllm serve` checks next
        validate_api_server_args(args)     # what the API server checks before it starts
        AsyncEngineArgs.from_cli_args(args)  # EngineArgs.__post_init__: JSON options into configs
    except Exception as err:
        return "%s: %s" % (type(err).__name__, str(err)[:600])
    return None


def verdict(argv):
    try:
        return check(argv)
    except Exception as err:  # vLLM raising where no check expected it: a finding too
        return "%s: %s" % (type(err).__name__, str(err)[:600])


results = [{"label": job["label"], "error": verdict(job["argv"])} for job in jobs]
with open(sys.argv[2], "w") as f:
    json.dump({"platform": platform_note, "build_seconds": round(built - started, 1),
               "parse_seconds": round(time.time() - built, 1), "results": results,
               "tool_parsers": len(tool_parsers), "reasoning_parsers": len(reasoning_parsers)}, f)
"""

STUB_RETURN = 34  # CUDA_ERROR_STUB_LIBRARY, what NVIDIA's own stub libcuda returns
# Driver entry points a CUDA runtime may look up by name besides those the extensions link.
STUB_ALWAYS = ("cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuGetProcAddress", "cuGetProcAddress_v2")


def _needs_libcuda(paths):
    """The shared objects among `paths` whose DT_NEEDED names libcuda.so.1 (one readelf run)."""
    out = subprocess.run(["readelf", "-d", "-W", *paths], capture_output=True, text=True).stdout
    found, current = [], paths[0] if len(paths) == 1 else None
    for line in out.splitlines():
        if line.startswith("File: "):
            current = line[6:].strip()
        elif "(NEEDED)" in line and "[libcuda.so.1]" in line and current:
            found.append(current)
    return sorted(set(found))


def build_stub_libcuda(folder):
    """Compile a libcuda.so.1 exporting every cu* symbol the installed vLLM and torch link against.

    Returns (folder or None, note). A stub rather than a real driver: nothing in it runs while
    vLLM's parser is built, but the dynamic loader refuses vLLM's extensions without the file.
    """
    try:
        ctypes.CDLL("libcuda.so.1")
        return None, "a real libcuda.so.1 is present"
    except OSError:
        pass
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++")
    if not compiler or not shutil.which("readelf") or not shutil.which("nm"):
        return None, "no C compiler or binutils in the image to build a stub libcuda.so.1"
    libs = []
    for package in ("vllm", "torch"):
        origin = importlib.util.find_spec(package).origin  # finds, does not import
        libs += glob.glob(os.path.join(os.path.dirname(origin), "**", "*.so*"), recursive=True)
    needing = _needs_libcuda(libs)
    symbols = set(STUB_ALWAYS)
    if needing:
        out = subprocess.run(["nm", "-D", "--undefined-only", *needing], capture_output=True, text=True).stdout
        symbols |= set(re.findall(r"\bU (cu[A-Z]\w*)", out))
    source = os.path.join(folder, "libcuda_stub.c")
    with open(source, "w") as f:
        f.write("".join(f"int {name}(void) {{ return {STUB_RETURN}; }}\n" for name in sorted(symbols)))
    result = subprocess.run([compiler, "-x", "c", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                             os.path.join(folder, "libcuda.so.1"), source], capture_output=True, text=True)
    if result.returncode != 0:
        return None, f"the stub libcuda.so.1 did not compile: {result.stderr.strip()[-300:]}"
    return folder, f"stub libcuda.so.1 with {len(symbols)} entry points for {len(needing)} libraries"


FAKE_SMI_WRAPPER = '#!/bin/sh\nexec "{python}" -S "{script}" "$@"\n'


def _write_hosts(conf, folder):
    """The fake nvidia-smi and the host profiles (the entrypoint's test fixtures) in `folder`."""
    script = os.path.join(folder, "fake_nvidia_smi.py")
    with open(script, "w") as f:
        f.write(conf["fake_nvidia_smi"])
    smi = os.path.join(folder, "nvidia-smi")
    with open(smi, "w") as f:
        f.write(FAKE_SMI_WRAPPER.format(python=sys.executable, script=script))
    os.chmod(smi, 0o755)
    profiles = {}
    for name, profile in conf["hosts"].items():
        profiles[name] = os.path.join(folder, f"host-{name}.json")
        with open(profiles[name], "w") as f:
            json.dump(profile, f)
    return smi, profiles


def _compat_marker(marker_path, folder):
    """A copy of the marker that claims compat libraries (in an empty folder), or None if it has them.

    An image built --without cuda-compat refuses hosts older than 580; the copy lets the check
    parse the argv a variant built WITH them gives those hosts (the argv does not depend on it).
    """
    with open(marker_path, encoding="utf-8") as f:
        marker = json.load(f)
    if marker.get("cuda_compat_dir"):
        return None
    marker["cuda_compat_dir"] = os.path.join(folder, "compat-stand-in")
    os.makedirs(marker["cuda_compat_dir"], exist_ok=True)
    path = os.path.join(folder, "marker-with-compat.json")
    with open(path, "w") as f:
        json.dump(marker, f)
    return path


def _catalogue(launcher):
    import tomllib  # Python >= 3.11, as every image's is
    with open(os.path.join(os.path.dirname(launcher), "models.toml"), "rb") as f:
        return sorted(tomllib.load(f)["models"])


def _launcher_package(launcher):
    """The image's launcher as a package (entrypoint/), imported from its folder's parent."""
    folder = os.path.dirname(launcher)
    sys.path.insert(0, os.path.dirname(folder))
    try:
        return (importlib.import_module(os.path.basename(folder) + ".knobs"),
                importlib.import_module(os.path.basename(folder) + ".launch"))
    finally:
        sys.path.pop(0)


def _knob_settings(knobs):
    """VL_* knob settings to try one at a time: every value of a choice knob, on and off of a switch,
    a sample of a number. Read from the image's own launcher (entrypoint/knobs.py)."""
    samples = {"positive_int": "2", "non_negative_int": "0", "context_length": "32768", "fraction": "0.85",
               "positive_float": "4", "yarn_factor": "2", "numa_nodes": "0 1"}
    settings = []
    for knob in knobs.KNOBS:
        if knob.name in ("VL_MODEL", "VL_PORT", "VL_NVIDIA_SMI", "VL_PREBAKED_MARKER"):
            continue  # the model is iterated over; the others are plumbing
        if knob.accepted == getattr(knobs, "ON_OFF", None):
            values = ["on", "off"]
        elif re.fullmatch(r"[\w.-]+(\|[\w.-]+)+", knob.accepted):
            values = knob.accepted.split("|")
        elif getattr(knob.parse, "__name__", "") in samples:
            values = [samples[knob.parse.__name__]]
        else:
            continue  # repo ids, alias lists: free text that reaches no choice of vLLM's
        settings += [(knob.name, value) for value in values]
    return settings


def _run_launcher(launcher, env, extra_args):
    result = subprocess.run([sys.executable, launcher, "--dry-run", *extra_args], env=env, capture_output=True,
                            text=True, timeout=120)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        return None, (lines[-1] if lines else f"exit {result.returncode}")
    return json.loads(result.stdout)["argv"], None


def catalogue_argvs(conf, base, profiles, compat_marker, pool):
    """Every catalogue model x host profile through the launcher's command line (`launch.py
    --dry-run`, as on a pod). Returns (jobs [{label, argv}], refusals [(label, why)], hosts that
    needed the compat marker copy)."""
    launcher, extra_args = conf["launcher"], conf.get("launcher_args", [])

    def run(model, host):
        env = dict(base, VL_MODEL=model, FAKE_NVIDIA_SMI_HOST=profiles[host])
        argv, why = _run_launcher(launcher, env, extra_args)
        if argv is None and compat_marker and "compatibility libraries" in why:
            argv, _ = _run_launcher(launcher, dict(env, VL_PREBAKED_MARKER=compat_marker), extra_args)
            return argv, why, argv is not None
        return argv, why, False

    jobs, refusals, compat_hosts = [], [], set()
    runs = {(m, h): pool.submit(run, m, h) for h in profiles for m in _catalogue(launcher)}
    for (model, host), future in runs.items():
        argv, why, with_compat = future.result()
        label = f"{model} on {host}"
        if argv is None:
            refusals.append((label, why))
            continue
        if with_compat:
            compat_hosts.add(host)
            label += " (as built with cuda-compat)"
        jobs.append({"label": label, "argv": argv})
    return jobs, refusals, compat_hosts


def _replayed_nvidia_smi(env, query_args, folder):
    """An nvidia-smi that replays, from a file, what the fake one answered to the launcher's query
    (sh and cat instead of a Python start: the sweep probes the same host ~900 times)."""
    done = subprocess.run([env["VL_NVIDIA_SMI"], *query_args], env=env, capture_output=True, text=True)
    answer = os.path.join(folder, "smi-answer.txt")
    with open(answer, "w") as f:
        f.write(done.stdout)
    script = os.path.join(folder, "nvidia-smi-replay")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nif [ \"$*\" = '{' '.join(query_args)}' ]; then cat '{answer}'; exit {done.returncode}; fi\n"
                f"exec '{env['VL_NVIDIA_SMI']}' \"$@\"\n")
    os.chmod(script, 0o755)
    return script


def knob_argvs(conf, env, pool, folder):
    """Every knob setting x catalogue model on one host, through the same launcher's make_plan in
    this process (what --dry-run prints; a process per run would cost ~0.1 s, 900 times).
    Returns (jobs, number of settings, runs refused by the launcher itself)."""
    launcher, extra_args = conf["launcher"], conf.get("launcher_args", [])
    knobs, launch = _launcher_package(launcher)
    settings = _knob_settings(knobs)
    query_args = getattr(sys.modules.get(launch.__package__ + ".probe"), "QUERY_ARGS", None)
    if query_args and all("'" not in arg for arg in query_args):
        env = dict(env, VL_NVIDIA_SMI=_replayed_nvidia_smi(env, query_args, folder))

    def plan(model, name, value):
        try:
            return list(launch.make_plan(dict(env, VL_MODEL=model, **{name: value}), list(extra_args)).argv)
        except launch.LaunchError:
            return None  # the launcher's own refusal, e.g. a method the model does not allow
        except Exception as err:  # a launcher that crashes on an accepted value is a finding too
            return f"the launcher crashed: {type(err).__name__}: {err}"

    sweep = [(m, k, v, pool.submit(plan, m, k, v)) for m in _catalogue(launcher) for k, v in settings]
    jobs, refused, crashes = [], 0, []
    for model, name, value, future in sweep:
        argv = future.result()
        label = f"{model} on {conf['knob_host']} with {name}={value}"
        if argv is None:
            refused += 1
        elif isinstance(argv, str):
            crashes.append(f"[{label}] {argv}")
        else:
            jobs.append({"label": label, "argv": argv})
    return jobs, len(settings), refused, crashes


def parse_with_vllm(jobs, folder):
    """Parse every argv in ONE process that imports vLLM (~8 s), with the stub libcuda.so.1 on
    its LD_LIBRARY_PATH only. Returns the child's outcome, or raises RuntimeError."""
    stub_dir, stub_note = build_stub_libcuda(folder)
    env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
    if stub_dir:
        env["LD_LIBRARY_PATH"] = stub_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    jobs_path, result_path = os.path.join(folder, "jobs.json"), os.path.join(folder, "results.json")
    with open(jobs_path, "w") as f:
        json.dump(jobs, f)
    child = subprocess.run([sys.executable, "-c", PARSE_SCRIPT, jobs_path, result_path], env=env,
                           capture_output=True, text=True, timeout=300)
    if child.returncode != 0 or not os.path.exists(result_path):
        raise RuntimeError(f"vLLM's serve parser could not be built ({stub_note}): {child.stderr.strip()[-1200:]}")
    with open(result_path) as f:
        outcome = json.load(f)
    outcome["stub"] = stub_note
    return outcome


_VLLM_OUTCOME = {}  # vllm-args computes, vllm-knobs reads: one vLLM import for both


def vllm_outcome(spec):
    """Make the argvs of both checks, parse them all with vLLM once, and split the results."""
    if _VLLM_OUTCOME:
        return _VLLM_OUTCOME
    conf = spec["vllm_args"]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        smi, profiles = _write_hosts(conf, folder)
        compat_marker = _compat_marker(spec["marker"], folder)
        base = {k: v for k, v in os.environ.items() if not k.startswith("VL_")}
        # An empty HF cache (no offline switch from stray weights), the image's own marker.
        base.update(VL_NVIDIA_SMI=smi, HF_HOME=os.path.join(folder, "hf-home"), VL_PREBAKED_MARKER=spec["marker"])
        with concurrent.futures.ThreadPoolExecutor(max(4, min(16, 2 * (os.cpu_count() or 2)))) as pool:
            catalogue, refusals, compat_hosts = catalogue_argvs(conf, base, profiles, compat_marker, pool)
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
        outcome = parse_with_vllm(unique, folder) if unique else {"results": []}
        outcome["launcher_seconds"] = round(made, 1)
        outcome["child_seconds"] = round(time.monotonic() - started - made, 1)
    # by argv: a knob setting that gives the same argv as another shares its verdict
    errors = {json.dumps(job["argv"]): item["error"] for job, item in zip(unique, outcome["results"])}
    _VLLM_OUTCOME.update(outcome=outcome, errors=errors, catalogue=catalogue, refusals=refusals,
                         compat_hosts=compat_hosts, knobs=knobs, settings=settings, refused=refused, crashes=crashes,
                         knob_host=conf.get("knob_host"), parsed=len(unique))
    return _VLLM_OUTCOME


def _rejections(jobs, errors):
    """vLLM's rejections of `jobs`, grouped by message, each naming the model, host (and knob)."""
    failures = {}
    for job in jobs:
        error = errors.get(json.dumps(job["argv"]))
        if error:
            failures.setdefault(error, []).append(job["label"])
    return [f"[{', '.join(labels[:6])}{' ...' if len(labels) > 6 else ''} ({len(labels)} argvs)] "
            f"{error if len(error) < 500 else error[:500] + '...'}" for error, labels in failures.items()]


def check_vllm_args(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm, so there is no vLLM parser to check the launcher's argv with")
    found = vllm_outcome(spec)
    if not found["catalogue"]:
        return False, "the launcher made no argv at all: " + "; ".join(
            f"{label}: {why}" for label, why in found["refusals"][:5])
    outcome = found["outcome"]
    notes = [f"{len(found['catalogue'])} argvs (catalogue models x host profiles) parsed by vLLM "
             f"{metadata.version('vllm')}'s serve parser on {outcome['platform']} ({outcome['stub']}; "
             f"launcher runs {outcome['launcher_seconds']} s, then stub and one vLLM process "
             f"{outcome['child_seconds']} s: import and parser {outcome['build_seconds']} s, "
             f"{found['parsed']} distinct argvs {outcome['parse_seconds']} s); parser names checked against "
             f"{outcome['tool_parsers']} tool and {outcome['reasoning_parsers']} reasoning parsers"]
    if found["compat_hosts"]:
        notes.append(f"this image refuses {', '.join(sorted(found['compat_hosts']))} (built without cuda-compat): "
                     "their argvs come from a marker copy that names a compat folder")
    if found["refusals"]:
        notes.append(f"skipped, refused by the launcher: " + "; ".join(
            f"{label}: {why}" for label, why in found["refusals"][:6]) + (" ..." if len(found["refusals"]) > 6 else ""))
    rejected = _rejections(found["catalogue"], found["errors"])
    if rejected:
        return False, "vLLM rejects the launcher's argv for " + " | ".join(rejected) + f". ({'; '.join(notes)})"
    return True, "; ".join(notes)


def check_vllm_knobs(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm, so there is no vLLM parser to check the launcher's argv with")
    found = vllm_outcome(spec)
    if not found["settings"]:
        return False, f"no knob settings were tried (knob host {found['knob_host']!r} not among the profiles?)"
    summary = (f"{found['settings']} VL_* settings x every catalogue model on {found['knob_host']}: "
               f"{len(found['knobs'])} argvs parsed, {found['refused']} runs refused by the launcher itself")
    rejected = _rejections(found["knobs"], found["errors"])
    problems = (["vLLM rejects the launcher's argv for " + " | ".join(rejected)] if rejected else []) + found["crashes"][:5]
    if problems:
        return False, " | ".join(problems) + f". ({summary})"
    return True, summary


FLASHINFER_AOT_PROBE = r"""
import json, sys
sys.path.insert(0, "/opt/prebake")
from flashinfer_aot import module_specs
from flashinfer.jit import env as jit_env
found = {}
for name in sys.argv[1:]:
    for spec in module_specs(name):
        if not spec.is_aot:
            raise SystemExit(f"{spec.name}: FlashInfer does not find {spec.aot_path}")
        spec.build_and_load()  # FLASHINFER_DISABLE_JIT=1: loads the prebuilt file or raises
        if spec.jit_library_path.exists():
            raise SystemExit(f"{spec.name}: compiled into {spec.jit_library_path} instead of loaded")
        found[spec.name] = spec.aot_path.stat().st_size
print(json.dumps(found))
"""


def check_flashinfer_aot(spec):
    """The FlashInfer modules compiled at build load through FlashInfer's own lookup, with JIT off."""
    names = spec.get("flashinfer_aot") or []
    if not names:
        raise Skipped("the stack compiles no FlashInfer module (stack.flashinfer_aot)")
    with tempfile.TemporaryDirectory() as workspace:
        env = dict(os.environ, FLASHINFER_DISABLE_JIT="1", FLASHINFER_WORKSPACE_BASE=workspace)
        env.setdefault("FLASHINFER_CUDA_ARCH_LIST", spec["cuda_arch"])
        result = subprocess.run([sys.executable, "-c", FLASHINFER_AOT_PROBE, *names], env=env,
                                capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, f"a prebuilt FlashInfer module would compile on the pod: {last[0][-600:]}"
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return True, "loaded without nvcc: " + ", ".join(f"{name} ({size / 1e6:.1f} MB)" for name, size in found.items())


CHECKS = {
    "marker": check_marker,
    "pins": check_pins,
    "imports": check_imports,
    "dependencies": check_dependencies,
    "nvcc": check_nvcc,
    "nvrtc": check_nvrtc,
    "one-cuda-release": check_one_release,
    "vllm-args": check_vllm_args,
    "vllm-knobs": check_vllm_knobs,
    "flashinfer-aot": check_flashinfer_aot,
}


def main():
    spec = json.loads(sys.argv[1])
    report = []
    for name in spec["checks"]:
        skipped = False
        try:
            ok, detail = CHECKS[name](spec)
        except Skipped as e:
            ok, detail, skipped = True, f"skipped: {e}", True
        except Exception as e:  # a check that crashes has failed, with the reason
            ok, detail = False, f"{e.__class__.__name__}: {e}"
        report.append({"check": name, "ok": ok, "detail": detail, "skipped": skipped})
    print(json.dumps(report))
    return 0 if all(item["ok"] for item in report) else 1


if __name__ == "__main__":
    sys.exit(main())
