"""Every VL_* knob: its meaning, default and accepted values, how a value is resolved, and the checks of
knobs against each other (check_settings, check_numa_nodes).

Precedence, for every knob: the container's environment, then the image's
`launch_defaults` (from the marker), then the default below. An empty value
counts as unset, as it did in the bootstrap script (`${VL_X:-default}`), because
RunPod templates often carry empty variables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

from .. import vllm_facts
from ..contract import port_number
from .effort import default_budgets, parse_overrides
from .report import LaunchError

# Ports that the nginx of RunPod's images already holds for the console's port
# proxy; vLLM died there on "OSError: [Errno 98] Address already in use", which
# reads like a leftover of a previous try (bootstrap lines 14-18).
RUNPOD_NGINX_PORTS = (3001, 7270, 7861, 8001, 8081, 9091)

KV_DTYPES = ("auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "turboquant_k3v4_nc", "turboquant_k8v4")
SPEC_METHODS = ("off", "on", "ngram", "mtp", "dspark", "dflash")
# vLLM's own choices, from entrypoint/vllm_facts.json (generated from the image's vLLM; the self-test's vllm-facts
# check compares it with vLLM, and vllm-knobs tries each value): the attention backends its CUDA platform may choose
# (AttentionBackendEnum members), the choices of its --moe-backend and --linear-backend.
ATTENTION_BACKENDS = vllm_facts.ATTENTION_BACKENDS
MOE_BACKENDS = vllm_facts.MOE_BACKENDS
LINEAR_BACKENDS = vllm_facts.LINEAR_BACKENDS
ON_WORDS = ("on", "1", "true", "yes")
OFF_WORDS = ("off", "0", "false", "no")

Parser = Callable[[str], object]


class BadValue(ValueError):
    """Raised by a parser; the caller turns it into a LaunchError naming the knob.

    Its message, when there is one, is a hint added to the accepted values ("at most 64")."""


# vLLM keeps these in 32-bit fields; a larger value only fails later, inside vLLM.
INT_MAX = 2**31 - 1
# Plain decimals only: float() also takes "inf", "nan", "1e400", "1_0" and " 7", which
# reached vLLM's argv or overflowed int() in the sizing (VL_YARN_FACTOR=inf).
_DECIMAL = re.compile(r"[0-9]{1,9}(\.[0-9]{0,9})?|\.[0-9]{1,9}")


def _integer(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,10}", text):  # ASCII: int() also reads "٣" and "1_0"
        raise BadValue(f"at most {INT_MAX}" if re.fullmatch(r"[0-9]+", text) else "")
    value = int(text)
    if value > INT_MAX:
        raise BadValue(f"at most {INT_MAX}")
    return value


def _integer_at_least(text: str, minimum: int) -> int:
    value = _integer(text)
    if value < minimum:
        raise BadValue
    return value


def positive_int(text: str) -> int:
    return _integer_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _integer(text)


def context_length(text: str) -> int:
    return _integer_at_least(text, 1024)


def decimal(text: str) -> float:
    if not _DECIMAL.fullmatch(text):
        raise BadValue("written as a plain decimal number (no exponent, inf or nan)")
    return float(text)


def fraction(text: str) -> float:
    value = decimal(text)
    if not 0.0 < value <= 1.0:
        raise BadValue
    return value


def positive_float(text: str) -> float:
    value = decimal(text)
    if not value > 0.0:
        raise BadValue
    return value


# Beyond this the host's memory is exceeded on any machine RunPod rents.
MAX_OFFLOAD_GIB = 4096.0


def offload_gib(text: str) -> float:
    value = positive_float(text)
    if value > MAX_OFFLOAD_GIB:
        raise BadValue
    return value


# Published YaRN factors go up to 40 (DeepSeek-V3); 1e10 overflowed the context arithmetic.
MAX_YARN_FACTOR = 64.0


def yarn_factor(text: str) -> float:
    value = positive_float(text)
    if not 1.0 < value <= MAX_YARN_FACTOR:
        raise BadValue
    return value


def on_off(text: str) -> bool:
    word = text.lower()
    if word in ON_WORDS:
        return True
    if word in OFF_WORDS:
        return False
    raise BadValue


def one_of(*choices: str, case_insensitive: bool = False) -> Parser:
    def parse(text: str) -> str:
        value = text.lower() if case_insensitive else text
        if value not in choices:
            raise BadValue
        return value
    return parse


def port(text: str) -> int:
    value = port_number(text)  # the one port rule, a container argument's --port's too
    if value is None or value in RUNPOD_NGINX_PORTS:
        raise BadValue
    return value


# Below this a heartbeat would flood the client (each one is an SSE event its SDK parses and skips)
# for no gain: RunPod's proxy cuts after ~100 s of silence.
MIN_HEARTBEAT_S = 0.5


def heartbeat_interval(text: str) -> float:
    value = positive_float(text)
    if value < MIN_HEARTBEAT_S:
        raise BadValue(f"at least {MIN_HEARTBEAT_S:g} s: a shorter interval floods the client with heartbeats")
    return value


# Below this, a swap's SIGKILL follows SIGTERM before vLLM can free anything (VL_SWAP_STOP), or no model could
# answer its health check in time and every swap would fail (VL_SWAP_LOAD): 1e-7 was accepted.
MIN_SWAP_STOP_S = 1.0
MIN_SWAP_LOAD_S = 1.0


def at_least(minimum: float, why: str) -> Parser:
    def parse(text: str) -> float:
        value = positive_float(text)
        if value < minimum:
            raise BadValue(f"at least {minimum:g} s: {why}")
        return value
    return parse


def bridge_mode(text: str) -> str:
    word = text.lower()
    if word == "keepalive" or word in ON_WORDS:  # the script's VL_BRIDGE=on is its keep-alive bridge now
        return "keepalive"
    if word in OFF_WORDS:
        return "off"
    raise BadValue


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# A served name goes into argv after --served-model-name: one starting with "-" would be read
# by vLLM as an option (VL_ALIASES="--model evil/model" did exactly that).
_SERVED_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@+\[\]-]{0,127}")


def served_names(text: str) -> tuple[str, ...]:
    names = words(text)
    for name in names:
        if not _SERVED_NAME.fullmatch(name):
            raise BadValue(f"{name!r} is not a name: each starts with a letter, digit or _ and holds only "
                           "letters, digits and _ . : / @ + [ ] - (at most 128 characters)")
    return names


# Hugging Face's own rule (huggingface_hub REPO_ID_REGEX): ASCII word characters, "-" and ".",
# neither "-" nor "." first or last, no "--" or "..", a name of at most 96 characters. It also
# keeps the served name (the repo's name) from ever reading as an option.
_REPO_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(_REPO_PART + "/" + _REPO_PART)


def repo_id(text: str) -> str:
    if not _REPO_ID.fullmatch(text) or ".." in text or "--" in text:
        raise BadValue
    return text


def numa_nodes(text: str) -> tuple[int, ...]:
    # Space-separated (vLLM takes them as nargs): "0 1", never "0,1".
    parts = text.split()
    if not parts or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
        raise BadValue
    return tuple(int(p) for p in parts)


EFFORT_LEVELS = tuple(default_budgets())


def effort_budgets(text: str) -> dict[str, int]:
    try:
        return parse_overrides(text, EFFORT_LEVELS)
    except ValueError as err:
        raise BadValue(str(err)) from None


# A served name of VL_SWAP: the pair's first half, matched against `model` in requests.
_SWAP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,127}")
_SWAP_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,95})?")


def swap_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """The script's VL_SWAP: `served-name:catalogue-key` pairs (or `served-name:owner/repo`, as VL_MODEL takes),
    comma-separated; `off` = no swapping.

    Only the syntax here: the keys are checked against the catalogue and the host by swap/plan.py."""
    if text.lower() in OFF_WORDS:
        return ()
    pairs = []
    for part in text.split(","):
        name, colon, key = part.strip().rpartition(":")
        if not colon or not _SWAP_NAME.fullmatch(name) or not _SWAP_KEY.fullmatch(key):
            raise BadValue(f"{part.strip()!r} is not served-name:catalogue-key (or served-name:owner/repo), "
                           "e.g. ornith:ornithnvfp4")
        if name in (n for n, _ in pairs):
            raise BadValue(f"the served name {name!r} appears twice")
        pairs.append((name, key))
    return tuple(pairs)


# A week: beyond it, idle stop is better off (a pod left that long is forgotten twice over).
MAX_IDLE_STOP_MIN = 10080.0


def idle_minutes(text: str) -> float | None:
    """VL_IDLE_STOP: minutes (fractions allowed: 0.5 = 30 s), or off (also 0): None."""
    if text.lower() in OFF_WORDS:
        return None
    value = decimal(text)
    if value == 0:
        return None
    if value > MAX_IDLE_STOP_MIN:
        raise BadValue
    return value


MAX_START_HOLD_MIN = 120.0


def start_hold_minutes(text: str) -> float:
    """VL_START_HOLD: minutes a generation request is held while vLLM starts (fractions allowed); 0 = not held."""
    value = decimal(text)
    if value > MAX_START_HOLD_MIN:
        raise BadValue(f"at most {MAX_START_HOLD_MIN:g} minutes")
    return value


def anything(text: str) -> str:
    return text


def journal_repo(text: str) -> str:
    kind = next((prefix for prefix in ("datasets/", "models/", "spaces/") if text.startswith(prefix)), "")
    repo_id(text[len(kind):])
    return text


def compile_cache_repo(text: str) -> str:
    kind = next((prefix for prefix in ("datasets/", "models/") if text.startswith(prefix)), "")
    repo_id(text[len(kind):])
    return text


def cache_root(text: str) -> str:
    if text.lower() == "off":
        return "off"
    if not text.startswith("/"):
        raise BadValue
    return text.rstrip("/") or "/"


@dataclass(frozen=True)
class Knob:
    name: str
    default: str  # "" = decided by the launcher (the meaning says how)
    accepted: str
    about: str  # what it does; "{flag}" stands for the vLLM option it sets
    parse: Parser
    flag: str = ""  # the option of `vllm serve` it sets, named here once: --help, the docs and decide.py read it

    @property
    def meaning(self) -> str:
        return self.about.replace("{flag}", self.flag)


ON_OFF = "on|off (also 1/0, true/false, yes/no)"

KNOBS: tuple[Knob, ...] = (
    Knob("VL_MODEL", "ornith", "a catalogue key (see models.toml) or a Hugging Face repo id owner/name",
         "model to serve", anything),  # checked against the catalogue by catalogue.resolve_model
    Knob("VL_CTX", "", "integer >= 1024, at most the model's limit",
         "{flag}; empty = largest tier (1000000/786432/524288/262144/131072) the VRAM holds",
         context_length, flag="--max-model-len"),
    Knob("VL_YARN", "on", ON_OFF,
         "allow YaRN context extension (rope_scaling + VLLM_ALLOW_LONG_MAX_MODEL_LEN) beyond the native context",
         on_off),
    Knob("VL_YARN_FACTOR", "", "number > 1, at most 64", "YaRN factor; empty = the model's catalogue factor", yarn_factor),
    Knob("VL_TP", "", "integer >= 1, at most the GPU count", "{flag}; empty = GPU count", positive_int,
         flag="--tensor-parallel-size"),
    Knob("VL_DP", "1", "integer >= 1; TP x DP at most the GPU count",
         "{flag}; > 1 forces tensor parallel 1 (one replica per GPU)", positive_int, flag="--data-parallel-size"),
    Knob("VL_UTIL", "", "number in (0, 1]",
         "{flag}; empty = 0.85 with TurboQuant KV, 0.90 with DSpark, else 0.93", fraction,
         flag="--gpu-memory-utilization"),
    Knob("VL_KV", "", "|".join(KV_DTYPES), "{flag}; empty = the model's default (bf16/auto = no flag)",
         one_of(*KV_DTYPES), flag="--kv-cache-dtype"),
    Knob("VL_SPEC", "", "|".join(SPEC_METHODS) + " (on = ngram), limited per model",
         "speculative decoding; empty = the model's measured default", one_of(*SPEC_METHODS, case_insensitive=True)),
    Knob("VL_MTP_N", "", "integer >= 1", "MTP speculative tokens; empty = the model's default (3 for Qwen3.8, else 2)",
         positive_int),
    Knob("VL_SPEC_N", "24", "integer >= 1", "ngram speculative tokens (solo)", positive_int),
    Knob("VL_LOOK_MAX", "16", "integer >= 1", "ngram prompt_lookup_max", positive_int),
    Knob("VL_LOOK_MIN", "2", "integer >= 1", "ngram prompt_lookup_min", positive_int),
    Knob("VL_DSPARK_MODEL", "RedHatAI/Qwen3.6-35B-A3B-speculator.dspark", "Hugging Face repo id",
         "DSpark draft model", repo_id),
    Knob("VL_DSPARK_N", "8", "integer >= 1", "DSpark speculative tokens", positive_int),
    Knob("VL_DFLASH2_MODEL", "z-lab/Qwen3.8-27B-DFlash2", "Hugging Face repo id", "DFlash2 draft model", repo_id),
    Knob("VL_DFLASH2_N", "7", "integer >= 1", "DFlash2 speculative tokens", positive_int),
    Knob("VL_ASYNC", "on", ON_OFF, "{flag}, only ever when no speculation is configured", on_off,
         flag="--async-scheduling"),
    Knob("VL_PORT", "8080", "1-65535 except RunPod nginx ports " + ", ".join(map(str, RUNPOD_NGINX_PORTS)),
         "the exposed port: the keep-alive bridge's, or vLLM's own {flag} with VL_BRIDGE=off (host 0.0.0.0); "
         "unset = VL_PROXY_PORT if set, else 8080", port, flag="--port"),
    Knob("VL_PROXY_PORT", "", "1-65535 except RunPod nginx ports " + ", ".join(map(str, RUNPOD_NGINX_PORTS)),
         "the script's name for the pod's exposed port: used when VL_PORT is unset", port),
    Knob("VL_BRIDGE", "keepalive", "keepalive|off (on = keepalive)",
         "keepalive: a bridge holds VL_PORT and relays to vLLM on VL_INTERNAL_PORT, with a heartbeat while vLLM "
         "is silent (RunPod's proxy cuts a connection silent for ~100 s); off: vLLM binds VL_PORT itself",
         bridge_mode),
    Knob("VL_INTERNAL_PORT", "18081", "1-65535 except RunPod nginx ports and VL_PORT",
         "vLLM's {flag} behind the keep-alive bridge (host 127.0.0.1)", port, flag="--port"),
    Knob("VL_HEARTBEAT", "15", f"number of seconds >= {MIN_HEARTBEAT_S:g}, well under the proxy's ~100 s",
         "keep-alive bridge: a heartbeat after this many seconds of silence from vLLM", heartbeat_interval),
    Knob("VL_START_HOLD", "10", f"minutes >= 0, fractions allowed, at most {MAX_START_HOLD_MIN:g}; 0 = off",
         "keep-alive bridge: a generation request that arrives while vLLM starts is held this long, with heartbeats, "
         "and answered once vLLM serves; past it (or when the start fails) the client gets 503 \"model loading\"",
         start_hold_minutes),
    Knob("VL_ALIASES", "claude-3-5-haiku claude-haiku-4-5 claude-sonnet-5 claude-opus-5 deepseek-v4-flash "
         "deepseek-v4-pro deepseek-v4-flash[1m] deepseek-v4-pro[1m] claude-sonnet-5[1m] claude-opus-5[1m]",
         "space-separated names (letters, digits, _ . : / @ + [ ] -; not starting with -), or none",
         "extra {flag} aliases, after <name>, claude-<name>, claude-<name>[1m]", served_names,
         flag="--served-model-name"),
    Knob("VL_SWAP", "off", "comma-separated served-name:catalogue-key pairs (the script's format; a key may be an "
         "owner/name repo id), or off",
         "models this pod swaps between on demand (needs the keep-alive bridge); VL_MODEL's model starts first",
         swap_pairs),
    Knob("VL_SWAP_SLEEP", "auto", "auto, 1, 2 or off",
         "how a swap changes models: vLLM's sleep mode (every model started once, the others asleep: level 1 keeps "
         "their weights in host RAM, level 2 reloads them from disk) or off (stop vLLM, start the other model); auto "
         "picks from the host's RAM and the models", one_of("auto", "1", "2", "off", case_insensitive=True)),
    Knob("VL_SWAP_DRAIN", "300", "number of seconds > 0",
         "before a swap, running requests on the loaded model get this long to finish, then an error", positive_float),
    Knob("VL_SWAP_STOP", "20", f"number of seconds >= {MIN_SWAP_STOP_S:g}",
         "a swap stops vLLM's process group with SIGTERM, then SIGKILL after this long (the script's 20 s)",
         at_least(MIN_SWAP_STOP_S, "vLLM needs a moment after SIGTERM to stop cleanly")),
    Knob("VL_SWAP_LOAD", "1200", f"number of seconds >= {MIN_SWAP_LOAD_S:g}",
         "a swapped-in model must answer its health check within this long, else the pod goes back to the "
         "previous model", at_least(MIN_SWAP_LOAD_S, "no model loads faster; every swap would fail")),
    Knob("VL_BATCHED", "8192", "integer >= 1", "{flag}", positive_int, flag="--max-num-batched-tokens"),
    Knob("VL_SEQS", "64", "integer >= 1", "{flag}", positive_int, flag="--max-num-seqs"),
    Knob("VL_LONGPREFILL", "", "integer >= 1", "{flag}; empty = vLLM default", positive_int,
         flag="--long-prefill-token-threshold"),
    Knob("VL_ATTN", "", "|".join(ATTENTION_BACKENDS),
         "{flag}; empty = vLLM's choice; ignored with TurboQuant KV", one_of(*ATTENTION_BACKENDS),
         flag="--attention-backend"),
    Knob("VL_OPT", "", "0|1|2|3", "{flag}; empty = vLLM default (2)", one_of("0", "1", "2", "3"),
         flag="--optimization-level"),
    Knob("VL_EFFORT_PATCH", "on", ON_OFF,
         "Anthropic thinking controls and effort levels reach the engine (thinking_token_budget, the model's "
         "reasoning switch); forced off with DSpark", on_off),
    Knob("VL_EFFORT_BUDGETS", "", "space-separated level=tokens, levels " + "|".join(EFFORT_LEVELS),
         "thinking tokens per effort level; empty = the table in thinking.toml", effort_budgets),
    Knob("VL_NUMA", "off", ON_OFF, "{flag} with VL_NUMA_NODES", on_off, flag="--numa-bind"),
    Knob("VL_NUMA_NODES", "0 1", "space-separated NUMA node numbers, one per GPU", "{flag}", numa_nodes,
         flag="--numa-bind-nodes"),
    Knob("VL_EP", "off", ON_OFF, "{flag} (only with tensor parallel > 1)", on_off, flag="--enable-expert-parallel"),
    Knob("VL_OFFLOAD", "", "number > 0, at most 4096 (GiB)", "{flag}", offload_gib, flag="--kv-offloading-size"),
    Knob("VL_NOVIDEO", "on", ON_OFF, "{flag} {\"video\":0}: no video processor at start", on_off,
         flag="--limit-mm-per-prompt"),
    Knob("VL_FASTOK", "on", ON_OFF, "VLLM_USE_FASTOKENS (Rust tokenizer)", on_off),
    Knob("VL_FLASHINFER", "off", ON_OFF, "VLLM_USE_FLASHINFER_SAMPLER", on_off),
    Knob("VL_HFOFFLINE", "auto", "auto|on|off",
         "HF_HUB_OFFLINE=1: auto = only when every repo needed is complete in the HF cache",
         one_of("auto", "on", "off", case_insensitive=True)),
    Knob("VL_CACHE_ROOT", "", "an absolute path, or off",
         "where every start-time cache goes (caches.toml, docs/caches.md); empty = /workspace when a volume is "
         "mounted there, else the libraries' own places; a cache variable already set wins", cache_root),
    Knob("VL_CACHE_REPO", "", "owner/name (a dataset, as the script had it), datasets/owner/name or models/owner/name",
         "a Hugging Face repository for vLLM's compile cache, shared across pods: restored before vLLM starts, "
         "published (with HF_TOKEN) after the first healthy start when the repository lacks it; empty = off",
         compile_cache_repo),
    # Seeing inside a pod (docs/status.md).
    Knob("VL_WATCHDOG", "90", "integer >= 0 (seconds); 0 = off",
         "exit (and let RunPod restart the pod) once vLLM's /health has failed or not answered for this long "
         "while serving; waiting clients get an error event", non_negative_int),
    Knob("VL_IDLE_STOP", "off", f"minutes > 0, fractions allowed (e.g. 30, 0.5), at most {MAX_IDLE_STOP_MIN:g}; or off",
         "on RunPod: after this long without a request (once vLLM serves), the pod asks RunPod's API to stop it "
         "(RUNPOD_POD_ID, RUNPOD_API_KEY); the RunPod template sets 60", idle_minutes),
    Knob("VL_JOURNAL", "off", ON_OFF,
         "upload the status page and vLLM's log tail to VL_JOURNAL_REPO with HF_TOKEN: every 25 s while starting, "
         "then every VL_JOURNAL_PERIODE s", on_off),
    Knob("VL_JOURNAL_REPO", "", "owner/name, or datasets/owner/name (also models/, spaces/)",
         "the Hugging Face repository the journal goes to (file prebake/<pod id>.txt)", journal_repo),
    Knob("VL_JOURNAL_PERIODE", "120", "integer >= 0 (seconds)",
         "journal upload period once serving; 0 = one upload when serving starts, then none", non_negative_int),
    # Nemotron (model flags in models.toml refer to these).
    Knob("VL_MAMBA_BACKEND", "flashinfer", "flashinfer|triton", "{flag} (Nemotron)",
         one_of("flashinfer", "triton"), flag="--mamba-backend"),
    Knob("VL_MAMBA_DTYPE", "float16", "float16|bfloat16|float32", "{flag} (Nemotron)",
         one_of("float16", "bfloat16", "float32"), flag="--mamba-ssm-cache-dtype"),
    Knob("VL_MOE_BACKEND", "", "|".join(MOE_BACKENDS),
         "{flag} (Nemotron); empty = vLLM's choice", one_of(*MOE_BACKENDS), flag="--moe-backend"),
    Knob("VL_LINEAR_BACKEND", "", "|".join(LINEAR_BACKENDS),
         "{flag} (Nemotron); empty = vLLM's choice", one_of(*LINEAR_BACKENDS), flag="--linear-backend"),
    Knob("VL_REPLAYSSM", "off", ON_OFF, "{flag} (Nemotron; needs VL_MAMBA_BACKEND=triton)", on_off,
         flag="--use-replayssm"),
    Knob("VL_STOCHASTIC", "off", ON_OFF,
         "Mamba cache stochastic rounding, 5 Philox rounds (Nemotron; not with triton before Blackwell)", on_off),
    Knob("VL_SSU", "", "simple|horizontal", "{flag} (Nemotron); empty = vLLM's choice",
         one_of("simple", "horizontal"), flag="--mamba-ssu-algorithm"),
    # Plumbing.
    Knob("VL_NVIDIA_SMI", "nvidia-smi", "path of an nvidia-smi executable", "nvidia-smi used by the host probe",
         anything),
    Knob("VL_MEMINFO", "/proc/meminfo", "path of a meminfo file",
         "host RAM read for sleep-mode swaps (VL_SWAP_SLEEP=auto)", anything),
    Knob("VL_CGROUP", "/sys/fs/cgroup", "path of the container's cgroup folder",
         "its memory limit bounds the host RAM sleep-mode swaps may fill", anything),
    Knob("VL_PREBAKED_MARKER", "/opt/.image_prebaked", "path of the marker JSON", "build-time marker to read",
         anything),
    Knob("VL_LD_CACHE", "/etc/ld.so.cache", "path of a glibc ld.so.cache",
         "the loader cache read to learn which libcuda vLLM will load", anything),
    Knob("VL_LD_SO_CONF", "/etc/ld.so.conf", "path of ld.so.conf (its ld.so.conf.d/ beside it is read)",
         "where the container runtime's compat drop-ins (ld.so.conf.d/00-compat-*.conf) are looked for", anything),
)
KNOBS_BY_NAME = {knob.name: knob for knob in KNOBS}


def flag_of(name: str) -> str:
    """The `vllm serve` option knob `name` sets (KNOBS names each once)."""
    flag = KNOBS_BY_NAME[name].flag
    if not flag:
        raise KeyError(f"{name} sets no option of vLLM's")
    return flag

# Knobs of the bootstrap script that have no meaning in a prebaked image. They
# are accepted (templates still set them) and reported as ignored.
RETIRED_KNOBS = {
    "VL_PARTIAL": "vLLM 0.27.1 has no --max-num-partial-prefills: its serve parser rejects the flag "
                  "(found by the image self-test's vllm-args check)",
    "VL_LMCACHE": "LMCache needs a second server process; the launcher execs vLLM alone",
    "VL_LMCACHE_CHUNK": "LMCache needs a second server process; the launcher execs vLLM alone",
    "VL_KVBYTES": "measured without gain and fatal when wrong (bootstrap v45); pass --kv-cache-memory-bytes instead",
    "VL_HUMMING_EXTRAS": "humming-kernels[cu13] is baked into the image",
    "VL_DESKTOP": "no desktop in a serving image",
    "VL_CACHE": "the compile cache is shared when VL_CACHE_REPO is set, and off when it is empty",
    "VL_SWAP_DIR": "the bridge asks the launcher to swap over a private channel, not through files",
    "VL_MODEL_KEY": "set by the bootstrap script for its swap loop; VL_MODEL names the model started first",
    "VL_SPEC_AUTO": "speculation defaults come from the catalogue; VL_SPEC overrides",
    "VL_MTP_N_QWEN38": "the catalogue carries each model's MTP depth; VL_MTP_N overrides",
}


@dataclass(frozen=True)
class Setting:
    name: str
    raw: str  # "" when unset everywhere
    value: object  # parsed; None when unset
    source: str  # "environment" | "launch_defaults" | "default" | "unset"


@dataclass(frozen=True)
class Settings:
    by_name: Mapping[str, Setting]
    ignored: tuple[tuple[str, str], ...]  # (name, why) for retired or unknown VL_* variables

    def value(self, name: str) -> object:
        return self.by_name[name].value

    def is_set(self, name: str) -> bool:
        return self.by_name[name].value is not None

    def source(self, name: str) -> str:
        return self.by_name[name].source


def exposed_port(settings: Settings) -> tuple[int, str]:
    """The pod's exposed port and why: VL_PORT, else the script's VL_PROXY_PORT (its lines 183-187), else 8080."""
    if settings.source("VL_PORT") != "default" or not settings.is_set("VL_PROXY_PORT"):
        return settings.value("VL_PORT"), f"VL_PORT from {settings.source('VL_PORT')}"
    return settings.value("VL_PROXY_PORT"), ("VL_PROXY_PORT (the script's name for the exposed port) from "
                                             f"{settings.source('VL_PROXY_PORT')}; VL_PORT unset")


def bad_value(knob: Knob, raw: str, source: str, hint: str = "") -> LaunchError:
    where = "" if source == "environment" else f" (from the image's {source})"
    extra = f" {hint}" if hint else ""
    return LaunchError(subject=knob.name, value=raw, problem=f"{knob.name}={raw!r}{where} is not valid",
                       fix=f"accepted values are {knob.accepted}.{extra}")


def resolve(env: Mapping[str, str], launch_defaults: Mapping[str, str]) -> Settings:
    settings: dict[str, Setting] = {}
    for knob in KNOBS:
        raw, source = env.get(knob.name, ""), "environment"
        if not raw:
            raw, source = launch_defaults.get(knob.name, ""), "launch_defaults"
        if not raw:
            raw, source = knob.default, "default"
        if not raw:
            settings[knob.name] = Setting(knob.name, "", None, "unset")
            continue
        if knob.name == "VL_ALIASES" and raw.strip().lower() == "none":
            settings[knob.name] = Setting(knob.name, raw, (), source)
            continue
        try:
            value = knob.parse(raw.strip())
        except BadValue as err:
            raise bad_value(knob, raw, source, f"({err})" if str(err) else "") from None
        settings[knob.name] = Setting(knob.name, raw, value, source)

    ignored = []
    for name in sorted(set(env) | set(launch_defaults)):
        if not name.startswith("VL_") or name in KNOBS_BY_NAME:
            continue
        if name in RETIRED_KNOBS:
            ignored.append((name, RETIRED_KNOBS[name]))
        else:
            import difflib  # only on this rare path: keeps start-up lean

            close = difflib.get_close_matches(name, list(KNOBS_BY_NAME), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            ignored.append((name, f"not a launcher variable{hint}"))
    return Settings(settings, tuple(ignored))


# --- checks across several inputs, which one knob's parser cannot make --------------------------------------
# Each stops the launcher with the variables named, before vLLM would fail on them later.

def check_settings(settings: Settings) -> None:
    """Knob against knob: run right after the knobs are resolved, before the host probe."""
    look_min, look_max = settings.value("VL_LOOK_MIN"), settings.value("VL_LOOK_MAX")
    if look_min > look_max:
        # vLLM's SpeculativeConfig refuses prompt_lookup_min > prompt_lookup_max at start.
        raise LaunchError(subject="VL_LOOK_MIN", value=str(look_min),
                          problem=f"VL_LOOK_MIN={look_min} is above VL_LOOK_MAX={look_max}",
                          fix="accepted values are VL_LOOK_MIN <= VL_LOOK_MAX (ngram lookup window, e.g. 2 and 16).")


def check_numa_nodes(settings: Settings, gpus_used: int, gpus_visible: int) -> None:
    """VL_NUMA_NODES against the GPUs: vLLM 0.27.1 takes one node per visible GPU and looks a
    worker's node up by its GPU index (vllm/utils/numa_utils.py: "GPU index 1 exceeds
    numa_bind_nodes size 1" when the list is shorter than TP x DP)."""
    nodes = settings.value("VL_NUMA_NODES")
    if not settings.value("VL_NUMA"):
        return
    shown = " ".join(map(str, nodes))
    if len(nodes) > gpus_visible:
        raise LaunchError(
            subject="VL_NUMA_NODES", value=shown,
            problem=f"VL_NUMA_NODES={shown!r} names {len(nodes)} NUMA nodes but this host has {gpus_visible} GPU(s)",
            fix=f"accepted values are one node per GPU, e.g. {' '.join(['0'] * gpus_visible)!r}; or VL_NUMA=off.")
    if len(nodes) < gpus_used:
        raise LaunchError(
            subject="VL_NUMA_NODES", value=shown,
            problem=f"VL_NUMA_NODES={shown!r} names {len(nodes)} NUMA node(s) but vLLM runs on {gpus_used} GPUs "
                    "(VL_TP x VL_DP)",
            fix=f"accepted values are one node per GPU, at least {gpus_used}; or VL_NUMA=off.")
