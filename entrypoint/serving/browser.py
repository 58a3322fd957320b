"""Which requests are a person's browser: a GET of a path a person may land on (the pod's address, RunPod's
"Connect, HTTP 8080" button; the status page's address, which the docs name), accepting text/html, with no key (a
browser sends none). Those get the page for a person (welcome.py); every other request, an API client's, gets
what it got before. Its own module because the key check (auth.KeyCheck, told by app.py), the status page and
the welcome page all ask it."""

from __future__ import annotations

from .auth import presented_keys

PAGE_PATHS = frozenset({"/", "/prebake/status", "/prebake/status.txt"})


def wants_page(scope) -> bool:
    """A browser at a page path: GET, text/html accepted, no key presented."""
    if scope["method"] != "GET" or scope["path"] not in PAGE_PATHS:
        return False
    headers = scope["headers"]
    accept = b",".join(value for name, value in headers if name == b"accept")
    return b"text/html" in accept.lower() and not presented_keys(headers)
