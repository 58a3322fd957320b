"""Real server processes for tests and benchmarks: the stand-in vLLM, the bridge, and nginx set up like RunPod's proxy.

Every server listens on 127.0.0.1 on a free port and is stopped by whoever started it. Times are scaled
down: nginx cuts after PROXY_TIMEOUT_S of silence (RunPod: about 100 s), the bridge beats every
HEARTBEAT_S (default 15 s), and a "long prefill" is SLOW_S.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from . import REPO
from .net import free_port, get, wait_for_port, wait_until

STANDIN = Path(__file__).with_name("standin.py")  # the file, for images that copy it (it needs only uvicorn)
STANDIN_COMMAND = [sys.executable, "-m", "prebake_testing.standin"]  # run here
BRIDGE = REPO / "entrypoint" / "bridge.py"
PROXY_TIMEOUT_S = 2
HEARTBEAT_S = 0.5
SLOW_S = 4.0  # twice the proxy's timeout


class Server:
    def __init__(self, command: list[str], port: int, what: str, env: dict | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.what = what
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        env=None if env is None else {**os.environ, **env})
        try:
            wait_for_port(port, self.process, what)
        except BaseException:  # nobody holds a server that did not start: stop it here
            self.stop()
            raise

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
        super().__init__([*STANDIN_COMMAND, "--port", str(port), *args], port, "the stand-in vLLM", env)

    def events(self) -> list[dict]:
        return get(self.port, "/_standin/events")[2]

    def requests(self) -> list[dict]:
        """The /v1/ requests it got, parsed (started with STANDIN_KEEP_REQUESTS=1)."""
        return get(self.port, "/_standin/requests")[2]

    def wait_held(self, *rids: str, timeout: float = 10) -> None:
        wait_held(self.port, *rids, timeout=timeout)

    def event(self, rid: str, timeout: float = 5) -> dict:
        """The last event of request `rid`, once the stand-in has one."""
        try:
            return wait_until(lambda: [e for e in self.events() if e["id"] == rid], timeout,
                              f"the stand-in's event for {rid}")[-1]
        except AssertionError:
            raise AssertionError(f"the stand-in has no event for {rid}: {self.events()}") from None


def held(port: int) -> list[dict]:
    """The requests the stand-in vLLM on `port` holds now (head received, answer not finished)."""
    return get(port, "/_standin/active")[2]


def wait_held(port: int, *rids: str, timeout: float = 10) -> None:
    """Until the stand-in vLLM on `port` holds every request named (x-standin-id): they reached vLLM."""
    wait_until(lambda: set(rids) <= {r["id"] for r in held(port)}, timeout,
               f"the stand-in vLLM on {port} holding {sorted(rids)}")


def start_bridge(upstream_port: int, heartbeat: float = HEARTBEAT_S, port: int | None = None,
                 wait_ready: bool = True, key: str | None = None, extra: list[str] = ()) -> Server:
    """`key`: the bridge's VLLM_API_KEY (none by default, whatever this environment holds). With `wait_ready`,
    returns once the bridge's /health says 200 (it has seen vLLM's), or after 10 s."""
    port = port or free_port()
    server = Server([sys.executable, str(BRIDGE), "--host", "127.0.0.1", "--port", str(port),
                     "--upstream", f"http://127.0.0.1:{upstream_port}", "--heartbeat", str(heartbeat), *extra],
                    port, "the bridge", env={"VLLM_API_KEY": key or ""})
    if wait_ready:
        try:
            wait_until(lambda: get(port, "/health")[0] != 503, 10, "the bridge's /health", server.process)
        except AssertionError:
            if server.process.poll() is not None:
                raise
            # still 503 after 10 s: a test of a bridge that never turns ready checks that itself
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


class NginxMissing(RuntimeError):
    pass


def start_nginx(folder: Path, upstream_port: int) -> Server:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise NginxMissing("nginx is not installed (.ci/run installs Debian's nginx)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=folder, port=port, upstream=upstream_port, timeout=PROXY_TIMEOUT_S))
    return Server([nginx, "-c", str(conf), "-p", str(folder), "-e", str(folder / "error.log")], port, "nginx")
