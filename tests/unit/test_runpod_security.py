"""The RunPod client against hostile or broken endpoints, served by real HTTP servers on loopback:
a key that is never shown, no redirect followed, https only (http to loopback for tests), and one deadline
for the whole request however the server dribbles its answer."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

from prebake import runpod
from prebake.errors import PrebakeError
from prebake_testing.buildpy import run_build_py

KEY = "rpa_SECRET_5f2a9c"
IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234"
PUBLISH = ("runpod", "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8")


class Server:
    """A loopback HTTP server whose handler is `answer(handler)`; records every request it receives."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], None]):
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                        "body": self.rfile.read(length)})
                answer(self)

            do_GET = do_POST = do_PATCH = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], Server]]:
    started: list[Server] = []

    def start(answer: Callable[[BaseHTTPRequestHandler], None]) -> Server:
        started.append(Server(answer))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def _json(handler: BaseHTTPRequestHandler, status: int, body: bytes, **headers: str) -> None:
    handler.send_response(status)
    for name, value in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
    return {**env, **extra}


def _payload() -> dict[str, Any]:
    return {"name": "t", "image": IMAGE}


# ---- the key ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [f"{KEY}\nX-Injected: 1", f"{KEY}\rX", f"{KEY} tail", f"{KEY}é", f"{KEY}\u2603",
                                 f"{KEY}\x7f"])
def test_a_key_that_cannot_be_a_header_is_refused_and_never_shown(serve, key) -> None:
    server = serve(lambda h: _json(h, 200, b'{"id": "x"}'))
    result = run_build_py(*PUBLISH, "--base-url", f"{server.url}/v2", env=_cli_env(RUNPOD_API_KEY=key))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "RUNPOD_API_KEY holds" in result.stderr and "copy the key again" in result.stderr
    assert "SECRET" not in result.stdout + result.stderr
    assert server.requests == []  # refused before any request


def test_a_key_never_appears_in_an_exception_or_its_repr() -> None:
    with pytest.raises(PrebakeError) as refused:
        runpod.Api(key=f"{KEY}\n", base_url="https://api.runpod.io/v2")
    assert "SECRET" not in str(refused.value) + repr(refused.value)
    assert "SECRET" not in repr(runpod.Api(key=KEY))


# ---- where the key may go ------------------------------------------------------------------------------------------

def test_a_redirect_is_not_followed_and_the_key_does_not_travel(serve) -> None:
    elsewhere = serve(lambda h: _json(h, 200, b'{"id": "tpl-stolen"}'))
    redirecting = serve(lambda h: _json(h, 302, b"", Location=f"{elsewhere.url}/v2/templates"))
    result = run_build_py(*PUBLISH, "--base-url", f"{redirecting.url}/v2", env=_cli_env(RUNPOD_API_KEY=KEY))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "HTTP 302, a redirect to" in result.stderr and "it is not followed" in result.stderr
    assert "created RunPod template" not in result.stdout
    assert [r["method"] for r in redirecting.requests] == ["GET"]  # the look-up by name: nothing written
    assert elsewhere.requests == []  # the Authorization header never reached the other host
    assert KEY not in result.stdout + result.stderr


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_no_redirect_status_is_followed(serve, status) -> None:
    elsewhere = serve(lambda h: _json(h, 200, b'{"id": "x"}'))
    redirecting = serve(lambda h: _json(h, status, b"", Location=f"{elsewhere.url}/v2/templates"))
    with pytest.raises(PrebakeError, match=f"HTTP {status}, a redirect"):
        runpod.create_template(runpod.Api(key=KEY, base_url=f"{redirecting.url}/v2", timeout_s=5), _payload())
    assert elsewhere.requests == []


def test_a_success_without_a_template_is_not_reported_as_created(serve) -> None:
    server = serve(lambda h: _json(h, 200, b"<html>login</html>"))
    result = run_build_py(*PUBLISH, "--base-url", f"{server.url}/v2", env=_cli_env(RUNPOD_API_KEY=KEY))
    assert result.returncode == 1 and "not JSON" in result.stderr and "created" not in result.stdout
    server2 = serve(lambda h: _json(h, 200, b"{}"))
    with pytest.raises(PrebakeError, match="not a template"):
        runpod.create_template(runpod.Api(key=KEY, base_url=f"{server2.url}/v2", timeout_s=5), _payload())


@pytest.mark.parametrize("url, problem", [
    ("file:///etc", "not an http(s) URL"),
    ("ftp://127.0.0.1/v2", "not an http(s) URL"),
    ("http://api.runpod.io/v2", "plain http"),
    ("http://10.0.0.1/v2", "plain http"),
    ("https://user:pw@api.runpod.io/v2", "no user"),
    ("https:///v2", "not an http(s) URL"),
    ("https://api.runpod.io:99999/v2", "not a URL"),
    ("not a url", "not an http(s) URL"),
    ("https://api.runpod.io", "its path ends in /v2"),
    ("https://api.runpod.io/v2/pods", "its path ends in /v2"),
    ("http://rest.runpod.io/v1", "v1 is retired"),
    ("https://rest.runpod.io/v2", "v1 is retired"),
])
def test_base_urls_that_are_refused(url, problem) -> None:
    assert problem in (runpod.base_url_problem(url) or "")
    with pytest.raises(PrebakeError, match="RUNPOD_REST_URL"):
        runpod.api_from_env(env={"RUNPOD_API_KEY": KEY, "RUNPOD_REST_URL": url})


def test_base_urls_that_are_accepted() -> None:
    for url in ("https://api.runpod.io/v2", "https://api.runpod.io/v2/", "http://127.0.0.1:8080/v2",
                "http://localhost:1/v2", "http://[::1]:8080/v2", "http://127.8.9.10/v2",
                "https://proxy.example.com/runpod/v2"):
        assert runpod.base_url_problem(url) is None, url


def test_a_file_url_from_the_environment_reads_nothing(tmp_path) -> None:
    (tmp_path / "templates").write_text('{"id": "from-a-file"}')
    result = run_build_py(*PUBLISH, env=_cli_env(RUNPOD_API_KEY=KEY, RUNPOD_REST_URL=tmp_path.as_uri()))
    assert result.returncode == 1 and "$RUNPOD_REST_URL" in result.stderr and "from-a-file" not in result.stdout


# ---- one deadline per request -------------------------------------------------------------------------------------

def _trickle(handler: BaseHTTPRequestHandler) -> None:
    """An answer that never ends: one byte at a time, each well inside any per-read timeout."""
    try:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        handler.wfile.flush()
        for _ in range(200):  # bounded: the server stops by itself after 40 s
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass


def _trickle_headers(handler: BaseHTTPRequestHandler) -> None:
    try:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass


@pytest.mark.parametrize("answer", [_trickle, _trickle_headers])
def test_a_server_that_trickles_is_cut_at_the_deadline(serve, answer) -> None:
    server = serve(answer)
    api = runpod.Api(key=KEY, base_url=f"{server.url}/v2", timeout_s=2)
    started = time.monotonic()
    with pytest.raises(PrebakeError, match=r"did not answer POST .* within 2 s"):
        runpod.create_template(api, _payload())
    assert time.monotonic() - started < 5


def test_a_server_that_accepts_and_says_nothing_is_cut_at_the_deadline() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        api = runpod.Api(key=KEY, base_url=f"http://127.0.0.1:{listener.getsockname()[1]}/v2", timeout_s=1.5)
        started = time.monotonic()
        with pytest.raises(PrebakeError, match="within 1.5 s"):
            runpod.create_template(api, _payload())
        assert time.monotonic() - started < 4


# ---- what RunPod says, on the user's terminal (issue 47) ----------------------------------------------------------

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m\r"
LONG_KEY = "rpa_N3x8Kq2Vb7Lm4Rt9Ws1Yz6Hc5Jd0Fg8Pe3Ua2Io7"  # a cut through it leaves more than 8 of its characters


def _problem(status: int, **fields: Any) -> Callable[[BaseHTTPRequestHandler], None]:
    body = json.dumps({"status": status, **fields}).encode()
    return lambda h: _json(h, status, body, **{"Content-Type": "application/problem+json"})


def test_terminal_escapes_in_runpods_problem_are_shown_escaped(serve) -> None:
    server = serve(_problem(422, title=f"Bad{ESCAPES}", detail=f"detail{ESCAPES}", errors=[f"$.name: {ESCAPES}"]))
    result = run_build_py(*PUBLISH, "--base-url", f"{server.url}/v2", env=_cli_env(RUNPOD_API_KEY=KEY))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    shown = result.stdout + result.stderr
    assert not any(char in shown for char in "\x1b\x07\x9b\r"), repr(shown)
    assert "HTTP 422: Bad\\x1b]0;owned\\x07\\x1b[2J\\x9b31m: detail" in result.stderr, result.stderr


def test_a_created_template_whose_fields_carry_escapes_is_printed_escaped(serve) -> None:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        body = {"templates": []} if handler.command == "GET" else {"id": f"tpl{ESCAPES}", "name": f"n{ESCAPES}"}
        _json(handler, 200 if handler.command == "GET" else 201, json.dumps(body).encode())

    result = run_build_py(*PUBLISH, "--base-url", f"{serve(answer).url}/v2", env=_cli_env(RUNPOD_API_KEY=KEY))
    assert result.returncode == 0, result.stderr
    assert "created RunPod template tpl\\x1b]0;owned" in result.stdout
    assert not any(char in result.stdout + result.stderr for char in "\x1b\x07\x9b\r")


@pytest.mark.parametrize("detail", [
    "k" * 440 + f" {LONG_KEY} rejected",  # "Unauthorized: " + 441: the 500-character cut falls 45 characters into it
    "k" * 460 + f" {LONG_KEY} rejected",  # 25 characters in
    "k" * 475 + f" {LONG_KEY} rejected",  # 10 characters in
    f"token {LONG_KEY[:20]}... rejected",  # RunPod's own cut: only its first 20 characters
    f"...{LONG_KEY[-12:]} rejected",  # only its last 12
])
def test_a_key_echoed_across_the_cut_is_never_shown_even_in_part(serve, detail) -> None:
    """RunPod's 401 echoes the key where the 500-character cut falls: masked before the cut; and any part of 8
    characters or more that a cut elsewhere left."""
    server = serve(_problem(401, title="Unauthorized", detail=detail))
    result = run_build_py(*PUBLISH, "--base-url", f"{server.url}/v2", env=_cli_env(RUNPOD_API_KEY=LONG_KEY))
    shown = result.stdout + result.stderr
    assert result.returncode == 1 and "HTTP 401" in shown and "rejected" in shown or "kkk" in shown, shown
    assert not any(LONG_KEY[start:start + 8] in shown for start in range(len(LONG_KEY) - 7)), shown[-700:]
