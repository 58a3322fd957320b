"""RunPod's REST API v2 as prebake uses it: the paths, the request bodies, and how to read its answers.

Pinned from RunPod's own schema (`api-reference-v2/openapi.json` of github.com/runpod/docs, info.version 2.0.0;
the tests validate every request against it where they have it, prebake_testing/runpod_api.py), v2 being "beta":
  GET   {base}/templates              -> 200 ListTemplatesResponse, {"templates": [Template, ...]}
  POST  {base}/templates              CreateTemplateRequest -> 201 Template
  PATCH {base}/templates/{id}         UpdateTemplateRequest -> 200 Template (only the fields sent change)
  POST  {base}/pods/{id}/action       PodActionRequest {"action": "stop"} -> 200 Pod
with {base} = contract.DEFAULT_REST_URL (https://api.runpod.io/v2) and `Authorization: Bearer <key>`. Errors are
RFC 9457 problems (`application/problem+json`: `title`, `status`, `detail`, and for a body that breaks the
schema, 422 with `errors`, one string per violation); a 429 says in `Retry-After` how many seconds to wait.

The build side (prebake/runpod.py, stdlib http.client) and the bridge's idle stop (serving/podstop.py, aiohttp,
which the image already has) each send with their own transport, and both build their requests and read
RunPod's answers here. Stdlib only (the launcher imports it).
"""

from __future__ import annotations

import json
import re
from typing import Callable

from .safetext import safe

TEMPLATES_PATH = "/templates"
TEMPLATES_LIST_KEY = "templates"  # v2 wraps a list in an object; v1 answered a bare array
STOP_ACTION = {"action": "stop"}  # PodActionRequest: start | stop | restart | terminate
ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what prebake puts in a path: a RunPod id, nothing that moves the path
MAX_RETRY_AFTER_S = 86_400  # the longest window RunPod's rate limits name is a day (RateLimit-Policy)


def template_path(template_id: str) -> str:
    return f"{TEMPLATES_PATH}/{template_id}"


def pod_action_path(pod_id: str) -> str:
    return f"/pods/{pod_id}/action"


def problem_text(raw: bytes, limit: int = 500, redact: Callable[[str], str] | None = None) -> str:
    """What RunPod said went wrong, for one log or error line: an RFC 9457 problem's title, detail and each of its
    `errors` (the field RunPod refused is named there); another JSON body's message; else the text itself. Made safe
    (safetext.safe): `redact` masks the key on the whole text, then control characters are escaped and it is cut."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return safe(_one_line(text), limit, redact) or "empty body"
    if not isinstance(data, dict):
        return safe(_one_line(text), limit, redact)
    title, detail, errors = data.get("title"), data.get("detail"), data.get("errors")
    parts = [_one_line(part) for part in (title, detail) if isinstance(part, str) and part]
    said = ": ".join(dict.fromkeys(parts))  # a detail that repeats the title once
    if isinstance(errors, list) and errors:
        said += f" ({'; '.join(_one_line(str(error)) for error in errors)})"
    if not said:  # not a problem: what a v1 server or a proxy in between might answer
        said = next((_one_line(data[key]) for key in ("message", "error") if isinstance(data.get(key), str)),
                    _one_line(text))
    return safe(said.strip(), limit, redact)


def retry_after_s(value: str | None) -> int | None:
    """A 429's Retry-After in seconds (RunPod's schema: an integer), or None when absent or not a number."""
    if value is None or not re.fullmatch(r"\s*[0-9]{1,6}\s*", value):
        return None
    return min(int(value), MAX_RETRY_AFTER_S)


def _one_line(text: str) -> str:
    """Whitespace runs (line breaks included) folded into one space; every other control is safe()'s to escape."""
    return " ".join(text.split())
