"""Real processes for the bridge tests: the stand-in vLLM, the bridge, and nginx set up like RunPod's proxy.

Every server listens on 127.0.0.1 on a free port and is stopped by its fixture. Times are scaled
down: nginx cuts after PROXY_TIMEOUT_S of silence (RunPod: about 100 s), the bridge beats every
HEARTBEAT_S (default 15 s), and a "long prefill" is SLOW_S.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port  # noqa: F401 (free_port: imported from here by the bridge and swap tests)

ROOT = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("standin.py")
BRIDGE = ROOT / "entrypoint" / "bridge.py"
PROXY_TIMEOUT_S = 2
HEARTBEAT_S = 0.5
SLOW_S = 4.0  # twice the proxy's timeout


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{process.stderr.read().decode()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


class Server:
    def __init__(self, command: list[str], port: int, what: str, env: dict | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.what = what
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        env=None if env is None else {**os.environ, **env})
        wait_for_port(port, self.process, what)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.stderr.read().decode()


class StandIn(Server):
    def __init__(self, port: int | None = None, args: list[str] = (), env: dict | None = None) -> None:
        """args: more of vLLM's arguments (--served-model-name ...); env: e.g. STANDIN_STRICT_NAMES=1."""
        port = port or free_port()
        super().__init__([sys.executable, str(STANDIN), "--port", str(port), *args], port, "the stand-in vLLM", env)

    def events(self) -> list[dict]:
        return get(self.port, "/_standin/events")[2]

    def event(self, rid: str, timeout: float = 5) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.events() if e["id"] == rid]
            if found:
                return found[-1]
            time.sleep(0.05)
        raise AssertionError(f"the stand-in has no event for {rid}: {self.events()}")


def start_bridge(upstream_port: int, heartbeat: float = HEARTBEAT_S, port: int | None = None,
                 wait_ready: bool = True, key: str | None = None, extra: list[str] = ()) -> Server:
    """`key`: the bridge's VLLM_API_KEY (none by default, whatever this environment holds)."""
    port = port or free_port()
    server = Server([sys.executable, str(BRIDGE), "--host", "127.0.0.1", "--port", str(port),
                     "--upstream", f"http://127.0.0.1:{upstream_port}", "--heartbeat", str(heartbeat), *extra],
                    port, "the bridge", env={"VLLM_API_KEY": key or ""})
    deadline = time.monotonic() + 10
    while wait_ready and get(port, "/health")[0] == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    return server


NGINX_CONF = """
daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 0;
        location / {{
            # RunPod's HTTP proxy as it behaves: a silent upstream is cut, nothing is buffered.
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout {timeout}s;
        }}
    }}
}}
"""


def start_nginx(folder: Path, upstream_port: int) -> Server:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail("nginx is not installed (.ci/run installs Debian's nginx)", pytrace=False)
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=folder, port=port, upstream=upstream_port, timeout=PROXY_TIMEOUT_S))
    return Server([nginx, "-c", str(conf), "-p", str(folder), "-e", str(folder / "error.log")], port, "nginx")


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


@pytest.fixture(scope="module")
def standin():
    server = StandIn()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bridge(standin):
    server = start_bridge(standin.port)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxied_bridge(bridge, tmp_path_factory):
    """nginx as RunPod's proxy, in front of the bridge."""
    server = start_nginx(tmp_path_factory.mktemp("nginx-bridge"), bridge.port)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxied_vllm(standin, tmp_path_factory):
    """nginx as RunPod's proxy, straight in front of the stand-in vLLM (VL_BRIDGE=off)."""
    server = start_nginx(tmp_path_factory.mktemp("nginx-direct"), standin.port)
    yield server
    server.stop()
