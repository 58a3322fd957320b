"""What the bridge does beside relaying, as the launcher decides it (contract.Observe, in state.json's "observe"):
the run folder, the watchdog, the journal (VL_JOURNAL) and the idle stop (idlestop.py decides it).

The run folder is on the volume when there is one (the cache root, caches.py), one folder per pod since a network
volume can be shared: a restarted container finds the previous run's state and log there (runstate.py writes them).
The journal uploads the status page and the tail of vLLM's log to a Hugging Face repository: the bridge does it
(serving/journal.py: why, how often and through what).
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
from typing import Mapping

from ..contract import HF_DEFAULT_ENDPOINT, JOURNAL_STARTING_PERIOD_S, Journal, Observe, hf_token
from .caches import cache_root
from .knobs import Settings
from .report import Decision
from .idlestop import decide_idle_stop

REPO_TYPES = {"datasets/": "dataset", "models/": "model", "spaces/": "space"}


def pod_name(env: Mapping[str, str]) -> str:
    name = env.get("RUNPOD_POD_ID") or socket.gethostname() or "pod"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64]


def decide_observe(settings: Settings, env: Mapping[str, str], bridge_mode: str) -> tuple[Observe | None, list[Decision]]:
    idle_stop, idle_decision = decide_idle_stop(settings, env, bridge_mode)
    if bridge_mode != "keepalive":
        return None, [Decision("status", "off: no status page, vLLM log file or watchdog",
                               "VL_BRIDGE=off: vLLM holds the exposed port and replaces the launcher"), idle_decision]
    root, _ = cache_root(settings.value("VL_CACHE_ROOT"))
    pod = pod_name(env)
    if root:
        run_dir, where = os.path.join(root, "prebake", pod), f"on the volume ({root}): kept across restarts"
    else:
        run_dir, where = os.path.join(tempfile.gettempdir(), "prebake", pod), "no volume: on the container disk"
    watchdog = settings.value("VL_WATCHDOG")
    journal, journal_decision = decide_journal(settings, env, pod)
    observe = Observe(run_dir, watchdog, journal, idle_stop)
    return observe, [
        Decision("status", f"GET /prebake/status (JSON) and /prebake/status.txt on the exposed port; vLLM's output "
                           f"also in {observe.log_file}", where),
        Decision("watchdog", "off (VL_WATCHDOG=0)" if not watchdog else
                 f"exit once vLLM's /health has failed for {watchdog} s while serving",
                 f"VL_WATCHDOG from {settings.source('VL_WATCHDOG')}; RunPod restarts a container that exits"),
        journal_decision, idle_decision]


def split_repo(value: str) -> tuple[str, str]:
    """"datasets/owner/name" -> ("dataset", "owner/name"); a bare owner/name is a model repository."""
    for prefix, kind in REPO_TYPES.items():
        if value.startswith(prefix):
            return kind, value[len(prefix):]
    return "model", value


def decide_journal(settings: Settings, env: Mapping[str, str], pod: str) -> tuple[Journal | None, Decision]:
    source = f"VL_JOURNAL from {settings.source('VL_JOURNAL')}"
    if not settings.value("VL_JOURNAL"):
        return None, Decision("journal", "off", source)
    repo = settings.value("VL_JOURNAL_REPO")
    # Off with a warning rather than a failed start: the script's templates set VL_JOURNAL=on with its
    # own repository built in, and a journal is never worth a pod.
    if not repo:
        return None, Decision("journal", "off: warning: VL_JOURNAL=on but VL_JOURNAL_REPO is unset",
                              "set VL_JOURNAL_REPO=owner/name (datasets/owner/name for a dataset), a repository "
                              "HF_TOKEN can write to")
    if not hf_token(env):
        return None, Decision("journal", "off: warning: VL_JOURNAL=on but HF_TOKEN is unset",
                              "the upload needs a Hugging Face token with write access to " + repo)
    kind, repo_id = split_repo(repo)
    journal = Journal(repo_id, kind, f"prebake/{pod}.txt", settings.value("VL_JOURNAL_PERIODE"))
    after = (f"then every {journal.period_s} s" if journal.period_s else "then once more when serving")
    return journal, Decision("journal", f"{journal.where(env.get('HF_ENDPOINT') or HF_DEFAULT_ENDPOINT)}: every {JOURNAL_STARTING_PERIOD_S} s until serving, {after}, "
                                        "and when the pod fails", source)
