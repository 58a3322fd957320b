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

from ..contract import Journal
from ..logline import utf8


def upload(journal: Journal, text: str, secret: str) -> None:
    from huggingface_hub import HfApi  # only with the journal on: it costs the bridge a second of imports

    HfApi(token=secret).upload_file(path_or_fileobj=utf8(text), path_in_repo=journal.path_in_repo,
                                    repo_id=journal.repo_id, repo_type=journal.repo_type,
                                    commit_message=f"prebake journal {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
