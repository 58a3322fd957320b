"""What Claude Code sends a pod and what it expects back: its wire, in one room (the paste block that sets it up is
claudecode.py's).

Seen from the real CLI (2.1.197 and 2.1.332, 2026-12-01, against a recording endpoint): `POST /v1/messages?beta=true`, streaming, with
- `X-Claude-Code-Session-Id` on every request of a session: the bridge's per-session prefix-cache figures
  (serving/sessions.py) and the router pod's affinity (routerpod/router.py keeps its own copy, checked equal by a test);
- `anthropic-beta` listing its betas, its own among them (`claude-code-20250219`);
- the key as `Authorization: Bearer` (ANTHROPIC_AUTH_TOKEN) or `x-api-key` (ANTHROPIC_API_KEY);
- model names of its own (`claude-opus-4-8`, `claude-haiku-4-5-20251001`, ...): a `claude-*` name the pod does not
  serve is answered by the pod's model (modelnames.py); a `[1m]` suffix is stripped from `model` and becomes a beta,
  and makes it assume a 1M window, so the pod also serves `claude-<name>[1m]` for other clients that keep it;
- background calls (hooks, titles): /v1/messages, no tools, thinking disabled or a JSON output format, small.
On a 401 it retried for ~3 minutes unless the answer carries `x-should-retry: false` (then it stops in ~2 s).
"""

from __future__ import annotations

import json

SESSION_HEADER = b"x-claude-code-session-id"  # X-Claude-Code-Session-Id, as ASGI spells header names
BETA_HEADER = b"anthropic-beta"
OWN_BETA = b"claude-code-"  # claude-code-20250219: its own beta, on its requests only
AUTH_TOKEN_VARIABLE = "ANTHROPIC_AUTH_TOKEN"  # Claude Code sends it as `Authorization: Bearer`
ANTHROPIC_KEY_VARIABLE = "ANTHROPIC_API_KEY"  # Claude Code sends it as `x-api-key`
NO_RETRY = (b"x-should-retry", b"false")  # on a 401: Claude Code stops at once instead of retrying for minutes
MODEL_PREFIX = "claude-"  # its model names (and other Anthropic clients')
LONG_CONTEXT_SUFFIX = "[1m]"
BACKGROUND_MAX_BYTES = 256 * 1024  # a background call is small; a main-loop request carries ~115 KB


def claude_names(name: str) -> tuple[str, str]:
    """The Claude-style names a pod serves its model `name` under: claude-<name> and claude-<name>[1m]."""
    return f"{MODEL_PREFIX}{name}", f"{MODEL_PREFIX}{name}{LONG_CONTEXT_SUFFIX}"


def is_claude_name(requested: str) -> bool:
    return requested.startswith(MODEL_PREFIX)


def session_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The session id, when it is a plausible one (at most 64 printable ASCII characters)."""
    for name, value in headers:
        if name == SESSION_HEADER:
            text = value.decode("latin-1").strip()
            return text if 0 < len(text) <= 64 and text.isascii() and text.isprintable() else None
    return None


def from_claude_code(headers: list[tuple[bytes, bytes]]) -> bool:
    """Claude Code marks its requests with its own beta (`anthropic-beta: claude-code-20250219,...`)."""
    return any(name == BETA_HEADER and OWN_BETA in value for name, value in headers)


def is_background(path: str, body: bytes | None) -> bool:
    """Claude Code's background shape: Anthropic messages, no tools, thinking disabled or a JSON output
    format (what it sends for hooks, titles and topic checks), in a small body (None: a large one)."""
    if path != "/v1/messages" or body is None or len(body) > BACKGROUND_MAX_BYTES:
        return False
    try:
        request = json.loads(body)
    except ValueError:
        return False
    if not isinstance(request, dict) or request.get("tools"):
        return False
    thinking = request.get("thinking")
    output = request.get("output_config")
    return ((isinstance(thinking, dict) and thinking.get("type") == "disabled")
            or (isinstance(output, dict) and "format" in output))
