"""Idle connections cannot take the pod down: the bridge raises its open-file soft limit to the hard one, and
past its connection cap (below that limit) a new connection closes the oldest idle one, so a client with the
key is served while hundreds of unauthenticated connections are held open. The limit is lowered here (200
files) so that the test needs 300 connections, not Docker's 1100."""

from __future__ import annotations

import resource
import socket
import sys

import pytest

from prebake_testing.servers import BRIDGE, Server
from prebake_testing.net import free_port, get, request

KEY = "limit-test-key-123"


def bridge_under(limits: str, upstream_port: int) -> Server:
    """The bridge started under `ulimit <limits>`: `-n 200` lowers soft and hard, `-S -n 200` the soft one only."""
    port = free_port()
    command = ["sh", "-c", f'ulimit {limits} && exec "$@"', "sh", sys.executable, str(BRIDGE), "--host", "127.0.0.1",
               "--port", str(port), "--upstream", f"http://127.0.0.1:{upstream_port}", "--heartbeat", "0.5"]
    return Server(command, port, "the bridge", env={"VLLM_API_KEY": KEY})


def open_files_limit(pid: int) -> tuple[str, str]:
    with open(f"/proc/{pid}/limits") as handle:
        line = next(line for line in handle if line.startswith("Max open files"))
    return tuple(line.split()[3:5])


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(standin):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 200:
        pytest.skip(f"the hard open-file limit here is {hard}")
    bridge = bridge_under("-S -n 200", standin.port)
    try:
        soft, raised = open_files_limit(bridge.process.pid)
        assert soft == raised != "200"
    finally:
        bridge.stop()


def test_hundreds_of_idle_connections_do_not_lock_out_a_client_with_the_key(standin):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    bridge = bridge_under("-n 200", standin.port)
    idle = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", bridge.port), timeout=5))
        status, _, raw = request(bridge.port, "POST", "/v1/chat/completions",
                                 {"model": "ornith", "stream": False, "messages": [{"role": "user", "content": "hi"}]},
                                 {"authorization": f"Bearer {KEY}"}, timeout=15)
        assert status == 200, raw
        assert get(bridge.port, "/health")[0] == 200
    finally:
        for connection in idle:
            connection.close()
        log = bridge.stop()
    assert "Too many open files" not in log and "Traceback" not in log, log
    assert 1 <= log.count("connections open (the open-file limit)") <= 5, log  # one line a second at most
