"""The bridge's ASGI chain (serving/app.py), run in this process and driven as uvicorn drives it.

The key is decided once per request (auth.KeyCheck), and every layer behind reads that decision.

One owner of what was written to the client (serving/response.py): the relay and the watchdog fail a request
through the same Response, so an error on /v1/messages/count_tokens is Anthropic's shape whichever writes it: the
relay when vLLM cannot be reached, the watchdog when it gives up on vLLM while the request waits, and the watchdog
again for a request that comes after it fired."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("uvicorn")

from entrypoint.serving import auth  # noqa: E402
from entrypoint.serving.app import build_app  # noqa: E402
from entrypoint.serving.relay import Config  # noqa: E402
from prebake_testing.net import free_port  # noqa: E402

COUNT_TOKENS = "/v1/messages/count_tokens"
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


class Client:
    """One request through the chain: what it was sent, and when its answer ended."""

    def __init__(self, chain, path: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
        self.sent: list[dict] = []
        self.ended = asyncio.Event()
        self.gone = asyncio.Event()  # never set: the client stays
        self.delivered = False
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "root_path": "", "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080),
                 "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode()),
                             *headers]}
        self.task = asyncio.ensure_future(chain(scope, self.receive, self.send))

    async def receive(self) -> dict:
        if not self.delivered:
            self.delivered = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended.set()

    async def answer(self) -> tuple[int, dict]:
        await asyncio.wait_for(self.ended.wait(), 10)
        await asyncio.wait_for(self.task, 10)
        status = next(m["status"] for m in self.sent if m["type"] == "http.response.start")
        return status, json.loads(b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body"))


async def started(upstream_port: int, key: str | None = None):
    environ = {auth.VLLM_KEY_VARIABLE: key} if key else {}
    chain = build_app(Config(upstream=f"http://127.0.0.1:{upstream_port}", heartbeat_s=30, api_key=key), environ)
    queue: asyncio.Queue = asyncio.Queue()
    complete = {name: asyncio.Event() for name in ("startup", "shutdown")}

    async def send(message: dict) -> None:
        complete[message["type"].split(".")[1]].set()

    task = asyncio.ensure_future(chain({"type": "lifespan"}, queue.get, send))
    await queue.put({"type": "lifespan.startup"})
    await asyncio.wait_for(complete["startup"].wait(), 10)
    chain.relay.ready.set()  # as if vLLM had answered its health check: the relay relays

    async def stop() -> None:
        await queue.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(complete["shutdown"].wait(), 10)
        await task

    return chain, stop


def anthropic_error(body: dict, kind: str) -> bool:
    return body.get("type") == "error" and body["error"]["type"] == kind and "message" in body["error"]


def test_count_tokens_fails_anthropic_shaped_when_the_relay_cannot_reach_vllm():
    async def scenario() -> None:
        chain, stop = await started(free_port())  # nothing listens there
        try:
            status, body = await Client(chain, COUNT_TOKENS).answer()
            assert status == 502 and anthropic_error(body, "api_error"), body  # Anthropic's type for a 5xx
        finally:
            await stop()

    asyncio.run(scenario())


def test_count_tokens_fails_anthropic_shaped_when_the_watchdog_fires_and_after():
    async def scenario() -> None:
        accepted = asyncio.Event()
        held: list[asyncio.StreamWriter] = []

        async def silent_vllm(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # reads nothing back, answers nothing: a vLLM that stopped answering
            accepted.set()

        server = await asyncio.start_server(silent_vllm, "127.0.0.1", 0)
        chain, stop = await started(server.sockets[0].getsockname()[1])
        try:
            waiting = Client(chain, COUNT_TOKENS)
            await asyncio.wait_for(accepted.wait(), 10)
            while not chain.tracker.flights:
                await asyncio.sleep(0.01)
            await chain.watchdog.fire("GET /health answered 500", 12.0)
            status, body = await waiting.answer()
            assert status == 503 and anthropic_error(body, "overloaded_error"), body  # Anthropic's documented type
            assert "vLLM stopped answering on this pod" in body["error"]["message"]
            assert chain.exit.code == 6 and chain.monitor.phase()[0] == "failed"
            status, body = await Client(chain, COUNT_TOKENS).answer()  # between the watchdog firing and the exit
            assert status == 503 and anthropic_error(body, "overloaded_error"), body
            status, body = await Client(chain, "/v1/chat/completions").answer()  # OpenAI's path: OpenAI's shape
            assert status == 503 and body["error"]["type"] == "service_unavailable" and body["error"]["code"] == 503
        finally:
            await stop()
            for writer in held:
                writer.close()
            server.close()

    asyncio.run(scenario())


def test_the_key_is_checked_once_per_request_and_every_layer_reads_that(monkeypatch):
    checks: list[bool] = []
    real = auth.is_authorized

    def counted(headers, key):
        checks.append(real(headers, key))
        return checks[-1]

    monkeypatch.setattr(auth, "is_authorized", counted)

    async def scenario() -> None:
        chain, stop = await started(free_port(), key="the-key")
        try:
            status, body = await Client(chain, COUNT_TOKENS).answer()  # no key: the relay's 401
            assert status == 401 and anthropic_error(body, "authentication_error") and checks == [False], body
            status, body = await Client(chain, COUNT_TOKENS, [(b"x-api-key", b"the-key")]).answer()
            assert status == 502 and checks == [False, True], body  # past the key, to a vLLM that is not there
        finally:
            await stop()

    asyncio.run(scenario())
