"""Ports and plain HTTP for tests and benchmarks: free ports, waits with a deadline, the stdlib client."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
from typing import Callable, TypeVar

T = TypeVar("T")
POLL_S = 0.05


def free_port() -> int:
    """A port nothing listens on now: tests never assume that a default port (8080, 18081) is free here."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports_from(count: int, besides: tuple[int, ...] = ()) -> int:
    """The first of `count` consecutive free ports, none of them in `besides`: a sleeping swap set's vLLMs listen
    on VL_INTERNAL_PORT, + 1, + 2..."""
    while True:
        first = free_port()
        ports = range(first, first + count)
        if first + count <= 65536 and not set(ports) & set(besides) and all(_bindable(port) for port in ports):
            return first


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def wait_until(condition: Callable[[], T], timeout: float, what: str, process: subprocess.Popen | None = None,
               every: float = POLL_S) -> T:
    """Poll `condition` until it returns something true (returned), for at most `timeout` seconds.

    The wait ends as soon as the observable condition holds; `every` only bounds how often it is asked.
    With `process`, its exit ends the wait early (AssertionError naming `what`, as on time-out)."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode} first")
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(every)


def answers(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            # a free port is in the ephemeral range: a connect can pick it as its own source port and reach itself
            # (TCP simultaneous open), which would say "listening" while nothing listens yet
            return sock.getsockname() != sock.getpeername()
    except OSError:
        return False


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read() if process.stderr else ""
            err = err.decode(errors="replace") if isinstance(err, bytes) else err
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{err[-3000:]}")
        if answers(port):
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


def get(port: int, path: str, headers: dict | None = None) -> tuple[int, dict, object]:
    status, head, raw = request(port, "GET", path, headers=headers)
    try:
        return status, head, json.loads(raw)
    except ValueError:
        return status, head, raw


def request(port: int, method: str, path: str, body: dict | bytes | None = None, headers: dict | None = None,
            timeout: float = 30) -> tuple[int, dict, bytes]:
    """One request with the standard library's client: the bytes exactly as the server sent them."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    payload = json.dumps(body).encode() if isinstance(body, dict) else body
    try:
        connection.request(method, path, body=payload,
                           headers={"content-type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def wait_healthy(port: int, process: subprocess.Popen | None = None, headers: dict | None = None,
                 timeout: float = 15) -> None:
    """Until GET /health on `port` answers 200 (through the bridge: vLLM is up and the relay knows it)."""
    wait_until(lambda: get(port, "/health", headers)[0] == 200, timeout, f"/health on {port} answering 200", process)


def send_json(handler, status: int, data) -> None:
    """The answer of a stdlib BaseHTTPRequestHandler stand-in (RunPod's API, the Hub): a sized JSON body."""
    raw = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)
