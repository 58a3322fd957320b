"""Which of vLLM's routes a request reaches, decided the way vLLM's router decides it, not by string equality.

vLLM 0.27.1 serves a FastAPI 0.136 app on Starlette 1.10 and uvicorn. uvicorn gives the app the decoded path
(urllib.parse.unquote of the target: `%2F` is a slash, `%0A` a line feed); the bridge receives the same
decoded path from the same uvicorn and sends vLLM the client's raw path unchanged (upstream.py), so both
see one path. Starlette's router then (starlette/routing.py):
- strips the app's root_path (vLLM's `--root-path`) from the front of the path, when what follows it starts
  with a slash (`_utils.get_route_path`): with `--root-path /x`, `/x/sleep` reaches /sleep, and so does `/sleep`;
- matches each route's `^<path>$` (compile_path: the static path escaped), case-sensitively, without merging
  slashes or resolving dot segments; Python's `$` also matches just before a final "\\n", so `/sleep\\n`
  (`/sleep%0A`) reaches /sleep and `/v1/chat/completions\\n` reaches chat completions;
- answers a path no route matches with a redirect to the same path with its trailing slashes removed (or one
  added), when that one matches (Router.redirect_slashes): the client asks the new path through the bridge.

`route_of` is that decision for the routes the bridge cares about; tests/serving/test_routes.py checks it
against a real Starlette app over a generated set of spellings.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Collection

from ..contract import root_path_of  # noqa: F401 - vLLM's --root-path, read from its argv: a fact of both processes


def route_path(path: str, root_path: str = "") -> str:
    """The path Starlette matches routes against (starlette._utils.get_route_path)."""
    if not root_path or not path.startswith(root_path):
        return path
    if path == root_path:
        return ""
    return path[len(root_path):] if path[len(root_path)] == "/" else path


@lru_cache(maxsize=None)
def _pattern(route: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(route) + "$")  # compile_path, for a path without parameters


def route_of(path: str, routes: Collection[str], root_path: str = "") -> str | None:
    """The route of `routes` (static paths, as vLLM registers them) that vLLM dispatches `path` to, or None."""
    if isinstance(routes, frozenset):  # the bridge's own sets: every request asks about the same few paths
        return _cached_route_of(path, routes, root_path)
    return _route_of(path, routes, root_path)


def _route_of(path: str, routes: Collection[str], root_path: str) -> str | None:
    matched = route_path(path, root_path)
    return next((route for route in routes if _pattern(route).match(matched)), None)


# Each request asked every route's pattern twice or more (the chain's routing, the key check's inside-only test):
# remembered for the paths seen last, a bounded number, whatever paths clients make up.
_cached_route_of = lru_cache(maxsize=4096)(_route_of)


def redirect_of(path: str, routes: Collection[str], root_path: str = "") -> str | None:
    """The route of `routes` that vLLM would redirect `path` to (redirect_slashes) were no other route to match."""
    matched = route_path(path, root_path)
    if route_of(path, routes, root_path) is not None or matched in ("", "/"):
        return None
    other = matched.rstrip("/") if matched.endswith("/") else matched + "/"
    return next((route for route in routes if _pattern(route).match(other)), None)


class Routed:
    """The bridge's outermost ASGI layer: a request whose path vLLM dispatches to one of `routes` carries that
    route as its path for every layer behind (status page, idle stop, watchdog, relay), so that each treats it
    as what vLLM will run. raw_path, which is what vLLM receives, stays the client's."""

    def __init__(self, app, routes: Collection[str], root_path: str = "") -> None:
        self.app, self.routes, self.root_path = app, frozenset(routes), root_path

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            route = route_of(scope["path"], self.routes, self.root_path)
            if route is not None and route != scope["path"]:
                scope = {**scope, "path": route}
        await self.app(scope, receive, send)
