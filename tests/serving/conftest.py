"""The bridge tests' fixtures: the stand-in vLLM, the bridge in front of it, and nginx set up like RunPod's proxy
(prebake_testing.servers), one of each per module, stopped at its end."""

from __future__ import annotations

import pytest

from prebake_testing.servers import NginxMissing, StandIn, start_bridge, start_nginx


def nginx(folder, upstream_port: int):
    try:
        return start_nginx(folder, upstream_port)
    except NginxMissing as e:
        pytest.fail(str(e), pytrace=False)


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
    server = nginx(tmp_path_factory.mktemp("nginx-bridge"), bridge.port)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxied_vllm(standin, tmp_path_factory):
    """nginx as RunPod's proxy, straight in front of the stand-in vLLM (VL_BRIDGE=off)."""
    server = nginx(tmp_path_factory.mktemp("nginx-direct"), standin.port)
    yield server
    server.stop()
