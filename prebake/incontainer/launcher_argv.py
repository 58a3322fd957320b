"""The argvs the image's launcher makes: every catalogue model on every host profile, and every
knob setting on one host, each with a fake nvidia-smi (the entrypoint's test fixtures, sent in the
spec: the image has no copy of the tests)."""

import contextlib
import json
import os
import re
import subprocess
import sys
import threading

from .programs.entrypoint_door import image_module

FAKE_SMI_WRAPPER = '#!/bin/sh\nexec "{python}" -S "{script}" "$@"\n'


def write_hosts(conf, folder):
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


def marker_with_compat(marker_path, folder):
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


def catalogue(launcher):
    import tomllib  # Python >= 3.11, as every image's is
    with open(os.path.join(os.path.dirname(launcher), "models.toml"), "rb") as f:
        return sorted(tomllib.load(f)["models"])


def launcher_package(launcher):
    """The image's launcher's knobs and command line, through the self-test's door to its entrypoint package."""
    folder = os.path.dirname(launcher)
    return image_module(folder, "launcher.knobs"), image_module(folder, "launcher.main")


def knob_settings(knobs):
    """VL_* knob settings to try one at a time: every value of a choice knob, on and off of a switch,
    a sample of a number. Read from the image's own launcher (entrypoint/launcher/knobs.py)."""
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


def catalogue_argvs(conf, base, profiles, compat_marker, pool, folder=None):
    """Every catalogue model x host profile. Returns (jobs [{label, argv}], refusals [(label, why)],
    hosts that needed the compat marker copy).

    Without `folder`, each through the launcher's command line (`launch.py --dry-run`, as on a pod).
    With it (in the image), each host's nvidia-smi answer is replayed from a file, the command line
    runs for the first model of each host, and the other models go through the same launcher's
    make_plan in this process (what --dry-run prints), probing each host once: 5 Python starts
    instead of 45. A host whose command line and make_plan disagree gets the command line for every
    model, and the disagreement is a refusal in the report.
    """
    launcher, extra_args = conf["launcher"], conf.get("launcher_args", [])
    host_env = {host: dict(base, FAKE_NVIDIA_SMI_HOST=profile) for host, profile in profiles.items()}
    launch = launcher_package(launcher)[1] if folder else None
    query_args = _query_args(launcher) if folder else None
    if query_args:
        for host, env in host_env.items():
            os.makedirs(os.path.join(folder, f"smi-{host}"), exist_ok=True)
            env["VL_NVIDIA_SMI"] = _replayed_nvidia_smi(env, query_args, os.path.join(folder, f"smi-{host}"))

    def in_process(env):
        try:
            return list(launch.make_plan(env, list(extra_args)).argv), None
        except launch.LaunchError as err:
            return None, str(err)

    def run(model, host, how):
        env = dict(host_env[host], VL_MODEL=model)
        argv, why = how(env)
        if argv is None and compat_marker and "compatibility libraries" in why:
            argv, _ = how(dict(env, VL_PREBAKED_MARKER=compat_marker))
            return argv, why, argv is not None
        return argv, why, False

    def command_line(env):
        return _run_launcher(launcher, env, extra_args)

    models = catalogue(launcher)
    results, disagreements = {}, []
    with probe_once_per_host(launch):
        first = {h: pool.submit(run, models[0], h, command_line) for h in profiles}
        checked = {h: pool.submit(run, models[0], h, in_process) for h in profiles} if launch else {}
        cli_hosts = set(profiles) if not launch else set()
        for host in profiles:
            results[(models[0], host)] = first[host].result()
            if launch and checked[host].result()[0] != results[(models[0], host)][0]:
                cli_hosts.add(host)
                disagreements.append((f"{models[0]} on {host}", "the launcher's command line and its make_plan "
                                      "give different argvs; every model of this host went through the command line"))
        rest = {(m, h): pool.submit(run, m, h, command_line if h in cli_hosts else in_process)
                for h in profiles for m in models[1:]}
        results.update({key: future.result() for key, future in rest.items()})

    jobs, refusals, compat_hosts = [], list(disagreements), set()
    for host in profiles:
        for model in models:
            argv, why, with_compat = results[(model, host)]
            label = f"{model} on {host}"
            if argv is None:
                refusals.append((label, why))
                continue
            if with_compat:
                compat_hosts.add(host)
                label += " (as built with cuda-compat)"
            jobs.append({"label": label, "argv": argv})
    return jobs, refusals, compat_hosts


@contextlib.contextmanager
def probe_once_per_host(launch):
    """While inside, the launcher's probe_host asks each fake host's nvidia-smi once: the answer
    does not change between models or knob settings (the command-line runs still probe for real)."""
    real = getattr(launch, "probe_host", None)
    if real is None:
        yield
        return
    hosts, lock = {}, threading.Lock()

    def probe(env):
        key = (env.get("VL_NVIDIA_SMI"), env.get("FAKE_NVIDIA_SMI_HOST"))
        with lock:
            if key not in hosts:
                hosts[key] = real(env)
            return hosts[key]

    launch.probe_host = probe
    try:
        yield
    finally:
        launch.probe_host = real


def _query_args(launcher):
    """The one nvidia-smi query of the launcher's probe (entrypoint/launcher/probe.py), or None."""
    _, launch = launcher_package(launcher)
    query_args = getattr(sys.modules.get(launch.__package__ + ".probe"), "QUERY_ARGS", None)
    return query_args if query_args and all("'" not in arg for arg in query_args) else None


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
    knobs, launch = launcher_package(launcher)
    settings = knob_settings(knobs)
    query_args = _query_args(launcher)
    if query_args:
        env = dict(env, VL_NVIDIA_SMI=_replayed_nvidia_smi(env, query_args, folder))

    def plan(model, name, value):
        try:
            return list(launch.make_plan(dict(env, VL_MODEL=model, **{name: value}), list(extra_args)).argv)
        except launch.LaunchError:
            return None  # the launcher's own refusal, e.g. a method the model does not allow
        except Exception as err:  # a launcher that crashes on an accepted value is a finding too
            return f"the launcher crashed: {type(err).__name__}: {err}"

    with probe_once_per_host(launch):
        sweep = [(m, k, v, pool.submit(plan, m, k, v)) for m in catalogue(launcher) for k, v in settings]
        results = [(m, k, v, future.result()) for m, k, v, future in sweep]
    jobs, refused, crashes = [], 0, []
    for model, name, value, argv in results:
        label = f"{model} on {conf['knob_host']} with {name}={value}"
        if argv is None:
            refused += 1
        elif isinstance(argv, str):
            crashes.append(f"[{label}] {argv}")
        else:
            jobs.append({"label": label, "argv": argv})
    return jobs, len(settings), refused, crashes
