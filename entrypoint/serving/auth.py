"""The pod's API key, checked by the bridge before anything reaches vLLM: decided once per request (KeyCheck, the
ASGI layer in front of the status page, the idle stop's count and the relay), read by each from the scope.

Clients send it the way their API does: `Authorization: Bearer KEY` (OpenAI SDKs, Claude Code's
ANTHROPIC_AUTH_TOKEN) or `x-api-key: KEY` (the Anthropic SDK, Claude Code's ANTHROPIC_API_KEY;
vLLM 0.27.1 alone reads only the first). Compared in constant time; never logged.
"""

from __future__ import annotations

import hmac
import posixpath
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from ..claudecode_wire import ANTHROPIC_KEY_VARIABLE, AUTH_TOKEN_VARIABLE, NO_RETRY
from ..contract import VLLM_KEY_VARIABLE  # the launcher puts the key here, whatever its source
from ..vllm_facts import DEV_ENDPOINTS
from . import routes
from .api import error_body
from .response import Response, refusal_log

# RunPod's health checks and load balancers ask /health without a key. OPTIONS stays open as in vLLM's
# own check: a browser's CORS preflight carries no credentials and reaches no model.
OPEN_PATHS = frozenset({"/health"})
REFUSED = ("this pod requires an API key: send it as `Authorization: Bearer KEY` (OpenAI SDKs, Claude Code's "
           f"{AUTH_TOKEN_VARIABLE}) or `x-api-key: KEY` (Anthropic SDK, Claude Code's {ANTHROPIC_KEY_VARIABLE})")
# What the 401 says, by what the request carried. Claude Code prints it after "Failed to authenticate. API Error:
# 401"; the key is the pod's VLLM_API_KEY, the name the docs export it under on the client's side too.
NO_KEY = ("no API key sent: this pod requires an API key, the pod's VLLM_API_KEY. Claude Code: export "
          f'{AUTH_TOKEN_VARIABLE}="$VLLM_API_KEY" (sent as `Authorization: Bearer`) or {ANTHROPIC_KEY_VARIABLE} '
          "(`x-api-key`); an SDK takes it as api_key.")
WRONG_KEY = ("wrong API key: the key sent is not this pod's (this pod requires an API key). Send the value of the "
             f"pod's VLLM_API_KEY (a RunPod secret): for Claude Code export {AUTH_TOKEN_VARIABLE}=\"$VLLM_API_KEY\"; an "
             "SDK takes it as api_key. Check it for a stray space or an old key.")
# Clients stop at once on a 401 that says so: without it Claude Code 2.1.x retried a 401 for ~3 minutes, then
# printed "Not logged in"; the OpenAI and Anthropic SDKs read the same header (and never retry a 401 anyway).
REFUSED_HEADERS = ((b"www-authenticate", b"Bearer"), NO_RETRY)


# What vLLM registers with VLLM_SERVER_DEV_MODE=1 (register_vllm_dev_api_routers), from entrypoint/vllm_facts.json,
# generated from the image's vLLM and checked against it by every build (the self-test's vllm-facts and sleep-mode):
# sleep mode needs them on vLLM's internal port; through the bridge anyone could put the pod's model to sleep or run
# collective_rpc in its workers.
INSIDE_ONLY = DEV_ENDPOINTS
INSIDE_ONLY_REFUSAL = ("{path} is one of vLLM's development endpoints: it is reachable only from inside the pod, on "
                       "vLLM's internal port, never through the keep-alive bridge (with or without the API key)")


def inside_only(path: str, root_path: str = "") -> bool:
    """A development endpoint of vLLM's, however the path is spelled: whatever vLLM's router would dispatch or
    redirect to one (a final line feed, a trailing slash, vLLM's --root-path in front: routes.py), and beyond
    what vLLM routes, repeated slashes and dot segments (an HTTP library on the way may resolve `..`)."""
    spelled = routes.route_path(path, root_path)
    return any(routes.route_of(candidate, INSIDE_ONLY) or routes.redirect_of(candidate, INSIDE_ONLY)
               for candidate in (spelled, posixpath.normpath("/" + spelled.lstrip("/"))))


def api_key(environ: Mapping[str, str]) -> str | None:
    """The key the bridge demands, or None when the pod is open to anyone with its URL. Whitespace around it
    is not part of it: no client can send it (HTTP strips a header value), and a secret is often pasted with
    its line break. A key of whitespace only is refused before the bridge starts (key_problem)."""
    return (environ.get(VLLM_KEY_VARIABLE) or "").strip() or None


def needs_key(method: str, path: str) -> bool:
    return path not in OPEN_PATHS and method != "OPTIONS"


def presented_keys(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """Every key a request carries, from `Authorization: Bearer` and `x-api-key` (ASGI headers, lower-case names)."""
    keys = []
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                keys.append(token.strip())
        elif name == b"x-api-key" and value.strip():
            keys.append(value.strip())
    return keys


def is_authorized(headers: Iterable[tuple[bytes, bytes]], key: str | None) -> bool:
    """True without a key; with one, when any key the request presents equals it (constant time)."""
    if key is None:
        return True
    expected = key.encode("utf-8")
    # compare_digest on every candidate: how many candidates there are is visible, which one matched is not
    return any([hmac.compare_digest(candidate, expected) for candidate in presented_keys(headers)])


def refusal(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The 401's message: no key at all, or a key that is not this pod's."""
    return WRONG_KEY if presented_keys(headers) else NO_KEY


ACCESS = "prebake.access"  # the scope's key for the request's Access


@dataclass(frozen=True, slots=True)
class Access:
    """What the key decides for one request; every layer behind KeyCheck reads it instead of checking again."""
    authorized: bool  # it carries this pod's key, or the pod has none
    needs_key: bool  # its path and method need the key (not /health, not OPTIONS)
    inside_only: bool  # one of vLLM's development endpoints: refused whoever asks

    @property
    def refused(self) -> bool:
        return self.inside_only or (self.needs_key and not self.authorized)


def decide(method: str, path: str, headers: Iterable[tuple[bytes, bytes]], key: str | None,
           root_path: str = "") -> Access:
    return Access(is_authorized(headers, key), needs_key(method, path), inside_only(path, root_path))


class KeyCheck:
    """The ASGI layer that decides a request's Access once (the key compared in constant time, once) and answers a
    refused request itself, before any other layer: 403 for vLLM's development endpoints, 401 (with
    `x-should-retry: false`) for a missing or wrong key, in the error shape of the path's API. `page` says which
    request a later layer answers without the key although its path needs one (a browser's welcome page)."""

    def __init__(self, app, key: str | None, root_path: str = "",
                 page: Callable[[dict], bool] = lambda scope: False) -> None:
        self.app, self.key, self.root_path, self.page = app, key, root_path, page

    async def __call__(self, scope, receive, send) -> None:
        # Written into the request's own scope, as Starlette writes its router's: no copy per layer.
        access = scope[ACCESS] = decide(scope["method"], scope["path"], scope["headers"], self.key, self.root_path)
        if access.refused and (access.inside_only or not self.page(scope)):
            await refuse(scope, send, access)
            return
        await self.app(scope, receive, send)


async def refuse(scope, send, access: Access) -> None:
    """The one answer to a refused request; the key itself is never logged."""
    path = scope["path"]
    response = Response.for_request(send, scope["method"], path)
    if access.inside_only:
        refusal_log(f"{scope['method']} {path}: refused, one of vLLM's development endpoints (inside the pod only)")
        await response.answer(403, error_body(response.error_api, INSIDE_ONLY_REFUSAL.format(path=path), 403))
        return
    await response.answer(401, error_body(response.error_api, refusal(scope["headers"]), 401), list(REFUSED_HEADERS))
