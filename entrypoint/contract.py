"""What crosses from the launcher's process to the bridge's, and nothing else: one module both import.

The launcher (launcher/) starts the bridge (serving/) with
- arguments: `bridge.py --port P --upstream URL --heartbeat S [--start-hold S] [--served-names JSON] [--swap JSON --control-fd N]`
  (`bridge_argv` writes them, the bridge's parser reads them; `--swap` is a `SwapConfig`);
- an environment: the names below (the API key, the run folder, nvidia-smi, tokens and RunPod's variables);
- a file: `state.json` in the run folder (`Observe`: launcher/observeplan.py decides it, launcher/runstate.py writes
  the file, the status page reads it);
- a socketpair, for a swap pod: the swap channel, its messages typed in swapchannel.py;
and each process ends with one of the exit codes below (the container's exit is the launcher's).
Stdlib only, like the launcher.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import urllib.parse
from dataclasses import dataclass
from typing import Mapping

from .untrusted import read_json

# --- Exit codes: a RunPod log or a test tells the families apart by them (docs/entrypoint.md lists them).
EXIT_BUG = 1  # anything else: a launcher bug, reported in one line (tests allow only 0 and 2-4)
EXIT_CONFIG = 2  # a VL_* value, a container argument or the catalogue is wrong
EXIT_HOST = 3  # no GPU, nvidia-smi missing or failing, driver too old
EXIT_MARKER = 4  # the image was not prebaked (marker missing or unreadable)
EXIT_BRIDGE = 5  # the keep-alive bridge died: the container stops rather than serve nothing
EXIT_WATCHDOG = 6  # the bridge's watchdog gave up on a vLLM that stopped answering /health (serving/watchdog.py)

# --- Environment names the bridge reads from the environment the launcher gives it.
VLLM_KEY_VARIABLE = "VLLM_API_KEY"  # what vLLM reads, and what the bridge reads, whatever the key's source
RUN_DIR_VARIABLE = "PREBAKE_RUN_DIR"  # how the bridge finds the run folder (state.json, vllm.log)
NVIDIA_SMI_VARIABLE = "VL_NVIDIA_SMI"  # the same nvidia-smi as the launcher's probe
HF_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")  # the journal's uploads
RUNPOD_POD_VARIABLE = "RUNPOD_POD_ID"
RUNPOD_KEY_VARIABLE = "RUNPOD_API_KEY"  # idle stop's key: in the bridge's environment only, never in a file
RUNPOD_URL_VARIABLE = "RUNPOD_REST_URL"  # the build side's `prebake runpod publish` reads it too
DEFAULT_REST_URL = "https://api.runpod.io/v2"  # RunPod's REST API v2 (entrypoint/runpodapi.py); v1 is retired


def key_problem(value: str) -> str | None:
    """What makes `value` unusable as the pod's key (whitespace around it is removed, not a problem), or None."""
    if value and not value.strip():
        return ("is only whitespace: no client could send it. Set the key itself (whitespace around it, such as "
                "a pasted line break, is removed), or unset it to leave the pod open")
    if any(ord(char) < 32 or ord(char) == 127 for char in value.strip()):
        return ("has a control character (a line break, a tab) inside it, which no HTTP header can carry: set the "
                "key on one line")
    return None


def port_number(text: str | None) -> int | None:
    """The one port rule (a container argument's, a VL_*_PORT knob's, the status page's): 1-65535 in ASCII digits, else None.
    ASCII because "²".isdigit() is True and int() reads "٣"; five digits at most because bind() raised
    OverflowError on 99999."""
    if text is None or not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= 65535:
        return None
    return int(text)


def hf_token(env: Mapping[str, str]) -> str | None:
    return next((env[name] for name in HF_TOKEN_VARIABLES if env.get(name)), None)


def runpod_base_url_problem(url: str) -> str | None:
    """Why `url` cannot be RunPod's REST API base, or None: https, or http to a loopback address (a test server),
    a path ending in /v2; never v1 (retired: its host or a path ending in /v1). The one rule of the launcher's
    idle stop and of `prebake runpod`, which both send a key there."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:
        return f"not a URL ({err})"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"not an http(s) URL with a host, like {DEFAULT_REST_URL}"
    path = parts.path.rstrip("/")
    if parts.hostname == "rest.runpod.io" or path.endswith("/v1"):
        return (f"RunPod's REST API v1 is retired (RunPod's guide \"Migrate from API v1\"), so nothing is sent there; "
                f"its v2 is {DEFAULT_REST_URL}, the default when {RUNPOD_URL_VARIABLE} is unset, or give a v2 base "
                "(its path ends in /v2)")
    if not path.endswith("/v2"):
        return f"not a RunPod REST API v2 base: its path ends in /v2, like {DEFAULT_REST_URL}"
    if parts.username is not None or parts.query or parts.fragment or any(c.isspace() for c in url):
        return "a base URL has no user, query, fragment or white space"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return "plain http would send the API key in clear; use https (http only to a loopback test server)"
    if port == 0:
        return "port 0 is not a port"
    return None


def is_loopback(host: str | None) -> bool:
    """localhost, or an address of the loopback network (IPv4 or IPv6, bracketed or not)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    import ipaddress  # only for a plain-http URL: the launcher's start-up does without it

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def runpod_key(env: Mapping[str, str]) -> str | None:
    """RUNPOD_API_KEY as it goes in the header (RunPod's console adds no spaces, a paste may), or None."""
    return env.get(RUNPOD_KEY_VARIABLE, "").strip() or None


# --- What the router pod (routerpod/router.py, a program of its own image) sends every pod: a pod still starting
# answers 503 at once instead of holding the request (VL_START_HOLD, serving/relay.py), so that nginx goes on to a
# pod that serves. router.py, copied alone into its image, writes the same name (tests/unit/test_boundaries.py
# checks it).
NO_START_HOLD_HEADER = "x-prebake-no-start-hold"


# --- The state file: the launcher writes it (one writer, replaced atomically), the bridge reads it.
STATE = "state.json"
LOG = "vllm.log"  # vLLM's output, written by the launcher (vllmlog.LogFile), followed by the bridge
JOURNAL_STARTING_PERIOD_S = 25  # the journal's uploads until vLLM serves (serving/journal.py)
HF_DEFAULT_ENDPOINT = "https://huggingface.co"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min"


@dataclass(frozen=True)
class Journal:
    """VL_JOURNAL's plan (launcher/observeplan.py decides it, serving/journal.py uploads)."""
    repo_id: str
    repo_type: str  # model | dataset | space
    path_in_repo: str
    period_s: int  # once serving; 0: no more uploads after the first one while serving

    def as_json(self) -> dict:
        return {"repo_id": self.repo_id, "repo_type": self.repo_type, "path_in_repo": self.path_in_repo,
                "starting_period_s": JOURNAL_STARTING_PERIOD_S, "serving_period_s": self.period_s}

    @classmethod
    def from_json(cls, plan: Mapping) -> Journal:
        return cls(plan["repo_id"], plan["repo_type"], plan["path_in_repo"], plan["serving_period_s"])

    def where(self, endpoint: str = HF_DEFAULT_ENDPOINT) -> str:
        prefix = "" if self.repo_type == "model" else self.repo_type + "s/"
        return f"{endpoint}/{prefix}{self.repo_id}/blob/main/{self.path_in_repo}"


IDLE_STOP_RETRY_FIRST_S = 2.0  # the wait after a failed stop request, doubled after each (serving/podstop.py)


@dataclass(frozen=True)
class IdleStop:
    """VL_IDLE_STOP's plan (launcher/idlestop.py decides it, serving/podstop.py stops the pod)."""
    after_s: float
    pod_id: str
    stop_url: str  # POST here, with the key from the bridge's environment
    retry_first_s: float = IDLE_STOP_RETRY_FIRST_S  # the launcher keeps the default; a test's plan shortens it

    def as_json(self) -> dict:
        return {"after_s": self.after_s, "pod_id": self.pod_id, "stop_url": self.stop_url,
                "retry_first_s": self.retry_first_s}


@dataclass(frozen=True)
class Observe:
    """The run folder and what the bridge does beside relaying: state.json's "observe"."""
    run_dir: str
    watchdog_s: int  # 0: off
    journal: Journal | None
    idle_stop: IdleStop | None = None  # VL_IDLE_STOP on RunPod

    @property
    def log_file(self) -> str:
        return os.path.join(self.run_dir, LOG)

    @property
    def state_file(self) -> str:
        return os.path.join(self.run_dir, STATE)

    def as_json(self) -> dict:
        return {"run_dir": self.run_dir, "log_file": self.log_file, "watchdog_s": self.watchdog_s,
                "journal": self.journal.as_json() if self.journal else None,
                "idle_stop": self.idle_stop.as_json() if self.idle_stop else None}


def read_state(path: str, kind: str = "state") -> dict:
    """state.json (or another JSON file of the run folder, by its kind in volumefiles.toml), or {} when it is
    missing or set aside (untrusted.py: a link, a FIFO, too big, too deep, another shape)."""
    data = read_json(path, kind)
    return data if isinstance(data, dict) else {}


def write_state(path: str, data: dict) -> None:
    """Replaced atomically, so that a reader never sees half a file."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".state-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
    os.replace(temporary, path)


def previous_run(state: dict) -> dict | None:
    """What the last run of this pod left: when it ran, how vLLM ended, where its log is now."""
    if not state:
        return None
    vllm = state.get("vllm") or {}
    return {"started_at": state.get("started_at"), "image": (state.get("identity") or {}).get("revision"),
            "exit": vllm.get("exit"), "log_file": LOG + ".1"}


# --- The bridge's arguments.
BRIDGE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bridge.py")


@dataclass(frozen=True)
class SwapTarget:
    """One model of a swap set as the bridge sees it: the names it routes and what /v1/models says."""
    name: str
    key: str
    repo: str
    max_model_len: int | None
    served: tuple[str, ...] = ()  # every name its vLLM answers to (--served-model-name), its own name first
    upstream: str | None = None  # its own vLLM's address with sleep mode (each model runs a vLLM); None: --upstream

    def as_json(self) -> dict:
        return {"name": self.name, "key": self.key, "repo": self.repo, "max_model_len": self.max_model_len,
                "served": list(self.served), "upstream": self.upstream}


@dataclass(frozen=True)
class SwapConfig:
    """`--swap`: VL_SWAP's models, as the launcher passes them (one JSON argument)."""
    models: tuple[SwapTarget, ...]  # the first one is loaded at start
    drain_s: float
    load_s: float
    sleep_level: int = 0  # vLLM's sleep mode: 1 or 2 (every model started once, the others asleep); 0: restarts

    def to_json(self) -> str:
        return json.dumps({"models": [model.as_json() for model in self.models], "drain_s": self.drain_s,
                           "load_s": self.load_s, "sleep_level": self.sleep_level}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SwapConfig:
        data = json.loads(text)
        return cls(tuple(SwapTarget(m["name"], m["key"], m["repo"], m.get("max_model_len"),
                                    tuple(m.get("served") or ()), m.get("upstream")) for m in data["models"]),
                   float(data["drain_s"]), float(data["load_s"]), int(data.get("sleep_level") or 0))


def bridge_argv(python: str, port: int, upstream: str, heartbeat_s: float, served: tuple[str, ...] = (),
                root_path: str = "", start_hold_s: float = 0.0) -> list[str]:
    """The bridge's command line; a swap pod adds `--swap` and `--control-fd` (swap_arguments). root_path: vLLM's
    --root-path, which its router strips from the front of a request's path (serving/routes.py)."""
    command = [python, str(BRIDGE_SCRIPT), "--port", str(port), "--upstream", upstream, "--heartbeat", f"{heartbeat_s:g}"]
    if start_hold_s:
        command += ["--start-hold", f"{start_hold_s:g}"]
    if served:
        command += ["--served-names", json.dumps(list(served))]
    if root_path:
        command.append(f"--root-path={root_path}")
    return command


def root_path_of(argv: list[str] | tuple[str, ...]) -> str:
    """vLLM's `--root-path` from its argv (the last one given, as argparse keeps it, in any spelling vLLM reads), or
    "": the launcher reads it for bridge_argv, and the bridge strips it from paths as vLLM's router does
    (serving/routes.py)."""
    from .vllmoptions import root_path  # vLLM's facts: read once the first argv is

    return root_path(argv)


def swap_arguments(swap: SwapConfig, control_fd: int) -> list[str]:
    return ["--swap", swap.to_json(), "--control-fd", str(control_fd)]


def swap_mode(sleep_level: int) -> str:
    """How a swap set changes models, as --dry-run, the decisions and the status page say it."""
    return f"sleep level {sleep_level}" if sleep_level else "restart"
