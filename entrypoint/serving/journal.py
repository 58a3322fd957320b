"""The journal: the status page and the tail of vLLM's log, uploaded to a Hugging Face repository.

The bootstrap script this project replaced did it because a pod without a working shell is seen
only through HTTP, and start-up, when one most needs to see, is when the endpoint does not answer:
every 25 s until vLLM serves, then every VL_JOURNAL_PERIODE seconds (120; 0 stops after the first
upload once serving), and once more when the pod fails. Uploads go through huggingface_hub (it
reads HF_ENDPOINT), one at a time, each bounded in time; a Hub that is down or refuses costs a
log line, never the pod.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from ..knobs import Settings
from ..record import Decision

STARTING_PERIOD_S = 25  # until vLLM serves; uploads happen in the bridge (uploader.py)
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
DEFAULT_ENDPOINT = "https://huggingface.co"
REPO_TYPES = {"datasets/": "dataset", "models/": "model", "spaces/": "space"}


@dataclass(frozen=True)
class Journal:
    repo_id: str
    repo_type: str  # model | dataset | space
    path_in_repo: str
    period_s: int  # once serving; 0: no more uploads after the first one while serving

    def as_json(self) -> dict:
        return {"repo_id": self.repo_id, "repo_type": self.repo_type, "path_in_repo": self.path_in_repo,
                "starting_period_s": STARTING_PERIOD_S, "serving_period_s": self.period_s}

    def where(self, endpoint: str = DEFAULT_ENDPOINT) -> str:
        prefix = "" if self.repo_type == "model" else self.repo_type + "s/"
        return f"{endpoint}/{prefix}{self.repo_id}/blob/main/{self.path_in_repo}"


def split_repo(value: str) -> tuple[str, str]:
    """"datasets/owner/name" -> ("dataset", "owner/name"); a bare owner/name is a model repository."""
    for prefix, kind in REPO_TYPES.items():
        if value.startswith(prefix):
            return kind, value[len(prefix):]
    return "model", value


def token(env: Mapping[str, str]) -> str | None:
    return next((env[name] for name in TOKEN_VARIABLES if env.get(name)), None)


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
    if not token(env):
        return None, Decision("journal", "off: warning: VL_JOURNAL=on but HF_TOKEN is unset",
                              "the upload needs a Hugging Face token with write access to " + repo)
    kind, repo_id = split_repo(repo)
    journal = Journal(repo_id, kind, f"prebake/{pod}.txt", settings.value("VL_JOURNAL_PERIODE"))
    after = (f"then every {journal.period_s} s" if journal.period_s else "then once more when serving")
    return journal, Decision("journal", f"{journal.where(env.get('HF_ENDPOINT') or DEFAULT_ENDPOINT)}: every {STARTING_PERIOD_S} s until serving, {after}, "
                                        "and when the pod fails", source)


def upload(journal: Journal, text: str, secret: str) -> None:
    from huggingface_hub import HfApi  # only with the journal on: it costs the bridge a second of imports

    HfApi(token=secret).upload_file(path_or_fileobj=text.encode("utf-8"), path_in_repo=journal.path_in_repo,
                                    repo_id=journal.repo_id, repo_type=journal.repo_type,
                                    commit_message=f"prebake journal {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
