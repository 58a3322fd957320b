"""The journal, the launcher's side (VL_JOURNAL): whether and where the bridge uploads the status page and the
tail of vLLM's log (a Hugging Face repository; serving/uploader.py uploads).

Why, how often and through what: serving/journal.py, the bridge's side, which does it.
"""

from __future__ import annotations

from typing import Mapping

from ..contract import HF_DEFAULT_ENDPOINT, JOURNAL_STARTING_PERIOD_S, Journal, hf_token
from .knobs import Settings
from .report import Decision

REPO_TYPES = {"datasets/": "dataset", "models/": "model", "spaces/": "space"}


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
