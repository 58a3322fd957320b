"""One owner of vLLM's health in the bridge: the relay's readiness, the status page (phase, watchdog) and a
swap all read the same GET /health and its last answer."""

import asyncio
import http.server
import threading

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("uvicorn")

from entrypoint.serving.app import build_app  # noqa: E402
from entrypoint.serving.health import Health  # noqa: E402
from entrypoint.serving.relay import Config, Relay  # noqa: E402


class Vllm(http.server.BaseHTTPRequestHandler):
    status = 503

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(Vllm.status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def vllm():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Vllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Vllm.status = 503
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_relay_the_status_page_and_a_swap_share_one_health():
    chain = build_app(Config(upstream="http://127.0.0.1:9"), {})
    assert chain.monitor.health is chain.relay.health


def test_the_relay_becomes_ready_on_the_answer_the_status_page_got(vllm):
    async def scenario():
        bridge = Relay(Config(upstream=vllm))
        waiting = asyncio.ensure_future(bridge.wait_for_vllm())
        assert not await bridge.health.check(1.0) and bridge.health.problem == "GET /health answered 503"
        await asyncio.sleep(0)  # one turn of the loop: the waiting task has seen the 503
        assert not bridge.ready.is_set()
        Vllm.status = 200
        assert await bridge.health.check(1.0) and bridge.health.problem is None
        await asyncio.wait_for(waiting, 1.0)  # no poll of its own: the one answer made it ready
        assert bridge.ready.is_set()
        Vllm.status = 500
        assert not await bridge.health.check(1.0) and bridge.health.last_ok is not None
        await bridge.health.close()

    asyncio.run(scenario())


def test_a_health_that_cannot_be_reached_says_why():
    async def scenario():
        health = Health("http://127.0.0.1:9")
        assert not await health.check(1.0)
        assert health.problem.startswith("GET /health failed (") and not health.answered.is_set()
        await health.close()

    asyncio.run(scenario())
