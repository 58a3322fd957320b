"""Fuzz the launcher (issue 10): random VL_* values (environment and marker launch_defaults),
container arguments, nvidia-smi outputs (through the fake nvidia-smi), markers and HF cache contents.

The only outcomes allowed: a plan (--dry-run JSON) or one clear error with exit code 2, 3 or 4;
never a traceback, never an option in argv that came from neither the launcher's code, the
catalogue nor a container argument.

Hypothesis, derandomized: CI runs the same cases every time. Most run the launcher in-process
(`launch.main(argv, environ)`, with the real fake nvidia-smi as a subprocess); a bounded few run
its real command line. PREBAKE_FUZZ_EXAMPLES=4000 runs more locally, PREBAKE_FUZZ_RANDOM=1 draws new
cases (report: `-s`).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from prebake_testing.hosts import FAKE_SMI, HOSTS, LAUNCH, ROOT
from entrypoint.launcher import main as launch  # noqa: E402
from entrypoint.launcher.catalogue import load_catalogue  # noqa: E402
from entrypoint.launcher.cmdline import option_key  # noqa: E402
from entrypoint.launcher.knobs import KNOBS, RETIRED_KNOBS  # noqa: E402

EXAMPLES = int(os.environ.get("PREBAKE_FUZZ_EXAMPLES", "400"))
SUBPROCESS_EXAMPLES = 20
CATALOGUE = load_catalogue()
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# What may appear as an option in the launcher's part of argv: the flags written in its code (an Option's, a
# knob's), and the catalogue's.
CODE_FLAGS = {flag for path in (ROOT / "entrypoint" / "launcher").glob("*.py")
              for flag in re.findall(r'Option\("(--[a-z0-9-]+)"', path.read_text())} \
    | {knob.flag for knob in KNOBS if knob.flag}
CATALOGUE_FLAGS = {flag.flag for model in CATALOGUE.values() for flag in model.flags}
ALLOWED_FLAGS = CODE_FLAGS | CATALOGUE_FLAGS
# argparse's rule: a token starting with "-" is an option unless it reads as a negative number.
NEGATIVE_NUMBER = re.compile(r"-\d+$|-\d*\.\d+$")


def looks_like_option(token: str) -> bool:
    return token.startswith("-") and not NEGATIVE_NUMBER.match(token)


# --- strategies ------------------------------------------------------------------------------------

KNOB_NAMES = [knob.name for knob in KNOBS if knob.name not in ("VL_NVIDIA_SMI", "VL_PREBAKED_MARKER")]
# Knobs whose values reach argv as values of options, drawn more often.
ARGV_KNOBS = ["VL_ALIASES", "VL_MODEL", "VL_DSPARK_MODEL", "VL_DFLASH2_MODEL", "VL_NUMA_NODES", "VL_OFFLOAD"]
OTHER_NAMES = sorted(RETIRED_KNOBS)[:4] + ["VL_MDOEL", "VL_"]
REPOS = sorted({m.repo for m in CATALOGUE.values()} | {m.tokenizer for m in CATALOGUE.values() if m.tokenizer}
               | {"Qwen/Qwen3-8B", "RedHatAI/Qwen3.6-35B-A3B-speculator.dspark", "z-lab/Qwen3.8-27B-DFlash2"})
HOSTILE = [
    "", " ", "0", "1", "2", "-1", "3.5", ".9", "0.93", "1.0", "4", "64", "65", "4096", "4097", "inf", "-inf",
    "nan", "1e10", "1e400", "1_0", " 7 ", "٣", "9" * 12, "9" * 5000, "0x10", "on", "off", "auto", "yes",
    "none", "0 1", "0,1", "0 1 2 3 4", "--model evil/model", "--trust-remote-code", "-q awq", "a --port=1",
    "ornith", "kimi", "nemotron", "dense", "Qwen/Qwen3-8B", "a/-q", "owner/--model", "../etc/passwd",
    "x\udcff", "fp8", "turboquant_k3v4_nc", "ngram", "mtp", "dspark", "dflash", "TRITON_ATTN", "triton",
    "131072", "1000000", "1024", "8080", "99999", "claude-x[1m] gpt-4o",
]


# What an injection looks like: options of vLLM, some of which the launcher itself sets.
OPTION_LIKE = st.tuples(
    st.sampled_from(["--", "-", "--no-"]),
    st.sampled_from(["model", "trust-remote-code", "port", "q", "tp", "enable-expert-parallel", "evil", "O3"]),
    st.sampled_from(["", "=1", " x/y", " 1"]),
).map("".join)
SENSIBLE = ["1", "2", "4", "16", "0.9", "8192", "131072", "on", "off"]


def knob_values(name: str):
    """Two values in three are plausible for the knob (its default, one of its choices, a small
    number), so that cases get past the knobs to the host, the cache and the plan."""
    knob = next((k for k in KNOBS if k.name == name), None)
    plausible = list(SENSIBLE)
    if knob is not None and "|" in knob.accepted and " " not in knob.accepted.split(" (")[0]:
        plausible = knob.accepted.split(" (")[0].split("|")
    if knob is not None and knob.default:
        plausible.append(knob.default)
    hostile = st.one_of(st.sampled_from(HOSTILE), OPTION_LIKE,
                        st.tuples(st.sampled_from(plausible), OPTION_LIKE).map(" ".join),
                        st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=12))
    return st.tuples(st.sampled_from(range(3)), st.sampled_from(plausible), hostile).map(
        lambda t: t[1] if t[0] < 2 else t[2])


@st.composite
def vl_settings(draw, max_size: int = 4) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from(KNOB_NAMES + OTHER_NAMES + ARGV_KNOBS * 4), max_size=max_size, unique=True))
    return {name: draw(knob_values(name)) for name in names}


GPU_NAMES = ["NVIDIA A40", "NVIDIA H200", "NVIDIA GeForce RTX 4090", "NVIDIA RTX 6000 Ada Generation",
             "NVIDIA RTX PRO 6000 Blackwell Server Edition", "", "A40, extra", "NVIDIA A40\udcff", "[N/A]"]
gpu = st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(GPU_NAMES), st.text(max_size=10)),
     "memory_total_mib": st.one_of(st.sampled_from([46068, 143771, 24564, 97887, 0, -1, 10**12]),
                                   st.integers(-10, 300_000), st.sampled_from(["[N/A]", "4\udcff", "1e3", "", "٣"])),
     "compute_cap": st.one_of(st.sampled_from(["8.6", "8.9", "9.0", "12.0", "-8.6", "[N/A]", "8", "10.0"]),
                              st.text(max_size=5))},
    optional={"index": st.one_of(st.integers(-1, 4), st.sampled_from(["٣", "x", ""]))})
PROFILES = [json.loads(path.read_text()) for path in sorted(HOSTS.glob("*.json"))]
random_host = (
    st.fixed_dictionaries(
        {"driver_version": st.one_of(st.sampled_from(["580.95.05", "570.195.03", "550.127.05", "535.1", "525.60",
                                                      "[N/A]", "", "580", "580.x"]), st.text(max_size=8)),
         "gpus": st.lists(gpu, max_size=4)},
        optional={"driver_failure": st.booleans()})
)

def weighted_choice(usual: list, unusual: list, usual_share: int = 9):
    """One of `usual` usual_share times out of usual_share + 1, else one of `unusual`."""
    return st.tuples(st.sampled_from(range(usual_share + 1)), st.sampled_from(usual), st.sampled_from(unusual)).map(
        lambda t: t[1] if t[0] < usual_share else t[2])


marker_object = st.fixed_dictionaries(
    {"variant": weighted_choice(["a40", "hopper"], ["x\udcff", "", 5]),
     "launch_defaults": st.one_of(st.just({}), vl_settings(max_size=3)),
     "cuda_compat_dir": weighted_choice(["<compat>"], ["/nonexistent", None, 5, ""]),
     "cuda": st.sampled_from(["13.0", "13.0", "12.8", "abc", None]),
     "cuda_arch": st.sampled_from(["8.6", "9.0", "12.0", None, 7])})
BROKEN_MARKERS = st.sampled_from([b"", b"[]", b"{}", b"\xff{", b'{"variant": 5}', b"[" * 5000,
                     b'{"variant": "a40", "launch_defaults": []}', b'{"variant": "a40", "launch_defaults": {"X": "1"}}'])

json_value = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                          max_leaves=6)
SHARD_NAMES = [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)]
index = st.one_of(
    st.none(),
    st.lists(st.sampled_from(SHARD_NAMES + ["../x", "/etc/passwd", "", "a/../b"]), min_size=1, max_size=3).map(
        lambda shards: json.dumps({"metadata": {}, "weight_map": {f"w{i}": s for i, s in enumerate(shards)}})),
    json_value.map(lambda value: json.dumps({"weight_map": value})),
    json_value.map(json.dumps),
    st.sampled_from([b"\xff\xfe", b"[" * 5000, b"{", json.dumps({"weight_map": {}})]),
)
cache_entry = st.fixed_dictionaries({
    "repo": st.sampled_from(REPOS),
    "ref": st.sampled_from([COMMIT, COMMIT, b"\xff", "../../..", "", None]),
    "config": st.booleans(),
    "tokenizer": st.booleans(),
    "single": st.booleans(),
    "index": index,
    "shards": st.lists(st.sampled_from(SHARD_NAMES), max_size=3, unique=True),
    "snapshots_is_a_file": st.booleans(),
})

ARG_POOL = ["--max-num-seqs", "8", "--port", "99999", "9000", "--port=8080", "--MODEL", "--model", "Qwen/Qwen3-8B",
            "--served-model-name", "a", "b", "-tp", "1", "--no-enable-prefix-caching", "--enable-prefix-caching",
            "--speculative-config", '{"method":"ngram","num_speculative_tokens":4}', "--tool-call-parser", "hermes",
            "--", "-", "--max_model_len=4096", "--Max-Num-Seqs", "-O3", "--trust-remote-code", "--dry-run",
            "--numa-bind-nodes", "0", "--kv-cache-dtype", "fp8", "-1", "", "--max-model-len", "4096"]
container_args = st.one_of(
    st.just([]),
    st.lists(st.one_of(st.sampled_from(ARG_POOL), st.text(alphabet=st.characters(blacklist_characters="\x00"),
                                                          max_size=8)), max_size=6),
)


def weighted(draw, usual, unusual, usual_share: int = 3):
    """`usual` usual_share times out of usual_share + 1: most cases must get deep enough to plan."""
    return draw(usual if draw(st.sampled_from(range(usual_share + 1))) < usual_share else unusual)


@st.composite
def cases(draw):
    return {"env": draw(vl_settings(max_size=3)), "host": weighted(draw, st.sampled_from(PROFILES), random_host, 4),
            "marker": weighted(draw, marker_object, BROKEN_MARKERS, 9),
            "cache": draw(st.lists(cache_entry, max_size=2)), "args": draw(container_args)}


# --- materialising a case --------------------------------------------------------------------------

def write_cache(hub: Path, entry: dict) -> None:
    folder = hub / ("models--" + entry["repo"].replace("/", "--"))
    if folder.exists():
        return  # the same repository drawn twice: the first one stands
    folder.mkdir(parents=True)
    if entry["ref"] is not None:
        (folder / "refs").mkdir(exist_ok=True)
        ref = entry["ref"]
        (folder / "refs" / "main").write_bytes(ref if isinstance(ref, bytes) else ref.encode())
    if entry["snapshots_is_a_file"] and not entry["config"]:
        (folder / "snapshots").write_text("not a folder")
        return
    snapshot = folder / "snapshots" / COMMIT
    snapshot.mkdir(parents=True, exist_ok=True)
    files: dict[str, str | bytes] = {}
    if entry["config"]:
        files["config.json"] = "{}"
    if entry["tokenizer"]:
        files["tokenizer_config.json"] = "{}"
    if entry["single"]:
        files["model.safetensors"] = "w"
    if entry["index"] is not None:
        files["model.safetensors.index.json"] = entry["index"]
    for shard in entry["shards"]:
        files[shard] = "w"
    for name, content in files.items():
        (snapshot / name).write_bytes(content if isinstance(content, bytes) else content.encode())


def materialise(case: dict, root: Path, smi: Path) -> tuple[dict[str, str], list[str]]:
    compat = root / "compat"
    compat.mkdir()
    marker_path = root / "image_prebaked"
    if isinstance(case["marker"], bytes):
        marker_path.write_bytes(case["marker"])
    else:
        data = dict(case["marker"])
        if data["cuda_compat_dir"] == "<compat>":
            data["cuda_compat_dir"] = str(compat)
        marker_path.write_text(json.dumps(data))
    profile = root / "host.json"
    profile.write_text(json.dumps(case["host"]))
    for entry in case["cache"]:
        write_cache(root / "hf" / "hub", entry)
    env = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "HF_HOME": str(root / "hf"),
           "VL_PREBAKED_MARKER": str(marker_path), "VL_NVIDIA_SMI": str(smi), "FAKE_NVIDIA_SMI_HOST": str(profile),
           **case["env"]}
    return env, ["--dry-run", *case["args"]]


# --- the oracle ------------------------------------------------------------------------------------

def check_outcome(rc: int, stdout: str, stderr: str, argv: list[str]) -> str:
    assert "Traceback" not in stderr, stderr
    assert "launcher bug" not in stderr, stderr
    if rc != 0:
        assert rc in (2, 3, 4), (rc, stderr)
        assert stdout == "" and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[prebake\] error: ", stderr), stderr
        return f"exit {rc}"
    plan = json.loads(stdout)  # exactly one JSON object
    command = plan["argv"]
    user = [arg for arg in argv if arg != "--dry-run"]
    assert command[:2] == ["vllm", "serve"] and not looks_like_option(command[2]), command
    assert command[len(command) - len(user):] == user, (command, user)  # container arguments verbatim, last
    user_keys = {option_key(arg) for arg in user} - {None}
    own = command[3:len(command) - len(user)]
    flags = [token for token in own if looks_like_option(token)]
    stray = [flag for flag in flags if flag not in ALLOWED_FLAGS]
    assert not stray, f"options in argv from no known source: {stray} in {command}"
    assert len(flags) == len(set(flags)), f"an option twice: {command}"
    assert not [flag for flag in flags if option_key(flag) in user_keys], "a container argument not winning"
    spec = next((m for m in CATALOGUE.values() if m.repo == command[2]), None)
    if "--trust-remote-code" in flags:
        assert spec is not None and spec.trust_remote_code, f"--trust-remote-code for {command[2]}: {command}"
    assert all(isinstance(v, str) or v is None for v in plan["env"].values())
    assert all(set(d) == {"topic", "decision", "why"} for d in plan["decisions"])
    return "plan"


@pytest.fixture(scope="module")
def fake_smi(tmp_path_factory) -> Path:
    """A fake nvidia-smi that reads its host profile from $FAKE_NVIDIA_SMI_HOST (one per case)."""
    script = tmp_path_factory.mktemp("fuzz-bin") / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nexec '{sys.executable}' -S '{FAKE_SMI}' \"$@\"\n")
    script.chmod(0o755)
    return script


# PREBAKE_FUZZ_RANDOM=1: new cases at every run (local exploration); CI keeps the same ones.
FUZZ_SETTINGS = dict(deadline=None, phases=[Phase.explicit, Phase.generate, Phase.shrink],
                     derandomize=not os.environ.get("PREBAKE_FUZZ_RANDOM"), database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def report(kind: str, outcomes: Counter) -> int:
    total = sum(outcomes.values())
    print(f"\nlauncher fuzz ({kind}): {total} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    return total


def test_fuzz_in_process(fake_smi):
    """Both outcomes must occur often, or the generator explores only one side (counted in this test alone)."""
    outcomes: Counter = Counter()

    @settings(max_examples=EXAMPLES, **FUZZ_SETTINGS)
    @given(case=cases())
    def one_case(case):
        with tempfile.TemporaryDirectory(prefix="prebake-fuzz-") as folder:
            env, argv = materialise(case, Path(folder), fake_smi)
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                rc = launch.main(argv, environ=env)
            outcomes[check_outcome(rc, out.getvalue(), err.getvalue(), argv)] += 1

    one_case()
    report("in process", outcomes)
    assert outcomes["plan"] >= EXAMPLES // 20, outcomes
    assert sum(v for k, v in outcomes.items() if k.startswith("exit")) >= EXAMPLES // 5, outcomes


def test_fuzz_command_line(fake_smi):
    outcomes: Counter = Counter()

    @settings(max_examples=SUBPROCESS_EXAMPLES, **FUZZ_SETTINGS)
    @given(case=cases())
    def one_case(case):
        with tempfile.TemporaryDirectory(prefix="prebake-fuzz-") as folder:
            env, argv = materialise(case, Path(folder), fake_smi)
            done = subprocess.run([sys.executable, str(LAUNCH), *argv], env=env, capture_output=True,
                                  text=True, errors="backslashreplace", timeout=60)
            outcomes[check_outcome(done.returncode, done.stdout, done.stderr, argv)] += 1

    one_case()
    assert report("command line", outcomes) >= SUBPROCESS_EXAMPLES // 2, outcomes
