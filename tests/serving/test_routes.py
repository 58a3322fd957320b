"""The bridge decides which of vLLM's routes a path reaches as vLLM's router does: checked against a real FastAPI /
Starlette app (the versions the image pins, images/locks/cu13-py312.txt) built the way vLLM 0.27.1 builds its own
(APIRouter routes included into FastAPI, redirect_slashes on, --root-path as FastAPI's root_path), over a
generated set of spellings. Through the real bridge: every development endpoint spelled with a final line feed
is refused, and a generation path spelled so gets the generation path's heartbeats."""

from __future__ import annotations

import asyncio
import itertools
import json
from urllib.parse import unquote

import pytest
from fastapi import APIRouter, FastAPI  # the test extras pin vLLM's FastAPI and Starlette (images/locks)
from fastapi.responses import JSONResponse

from entrypoint.serving import auth, routes
from entrypoint.serving.relay import ROUTES
from prebake_testing.net import request
from prebake_testing.servers import start_bridge


def vllm_like_app(root_path: str) -> FastAPI:
    app = FastAPI(root_path=root_path) if root_path else FastAPI()
    router = APIRouter()
    for path in sorted(ROUTES):
        async def endpoint(path=path):
            return JSONResponse({"route": path})
        router.add_api_route(path, endpoint, methods=["POST"])
    app.include_router(router)
    return app


def starlette_says(app: FastAPI, path: str) -> tuple[str, str | None]:
    """("route", R) when the app runs route R; ("redirect", R) when it redirects to a path that runs R; ("none",)."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode("utf-8", "surrogateescape"), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"pod")], "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1)}
    asyncio.run(app(scope, receive, send))
    status = sent[0]["status"]
    if status == 200:
        return "route", json.loads(sent[1]["body"])["route"]
    if status in (307, 308):
        location = dict(sent[0]["headers"])[b"location"].decode()
        target = unquote("/" + location.split("://", 1)[1].split("/", 1)[1])
        again = starlette_says(app, target)
        return ("redirect", again[1]) if again[0] == "route" else ("none", None)
    return "none", None


def spellings(route: str, root: str) -> list[str]:
    """Raw request targets a client can send for `route`, decoded the way uvicorn decodes them (unquote)."""
    head, _, last = route.rpartition("/")
    raw = [route, route + "%0A", route + "%0a", route + "%0A%0A", route + "%0D", route + "%0D%0A", route + "%09",
           route + "%20", route + "%00", route + "/", route + "//", route + "%0A/", route + "/%0A", "/" + route,
           route.upper(), route.replace("/", "%2F"), head + "/" + "".join(f"%{ord(c):02X}" for c in last),
           "/v1/.." + route, route + "/.", route + "%2F", route + "%2F%0A"]
    if root:
        raw += [root + each for each in raw] + [root + "/" + route, root.rstrip("/") + "x" + route]
    return [unquote(each) for each in raw]


@pytest.mark.parametrize("root", ["", "/proxy", "/proxy/"])
def test_the_bridge_reaches_the_route_starlette_reaches(root):
    app = vllm_like_app(root)
    checked = 0
    for route, path in itertools.chain.from_iterable(((r, p) for p in spellings(r, root)) for r in sorted(ROUTES)):
        kind, reached = starlette_says(app, path)
        ours = routes.route_of(path, ROUTES, root)
        if kind == "route":
            assert ours == reached, (path, reached, ours)
        else:
            assert ours is None, (path, kind, ours)
        if kind == "redirect":
            assert routes.redirect_of(path, ROUTES, root) == reached, path
        # Whatever vLLM would run or redirect to as a development endpoint, the bridge refuses.
        if reached in auth.INSIDE_ONLY:
            assert auth.inside_only(path, root), (path, kind)
        elif kind == "route":
            assert not auth.inside_only(path, root), path
        checked += 1
    assert checked > 500


@pytest.fixture(scope="module")
def rooted(standin):
    server = start_bridge(standin.port, extra=["--root-path=/proxy"])
    yield server
    server.stop()


@pytest.mark.parametrize("path", [f"{route}%0A" for route in sorted(auth.INSIDE_ONLY)] + [
    "/sleep%0A?level=1", "/sleep%0a?level=1", "/wake_up%0A?tags=weights", "/sleep%0A/", "/%73leep%0A",
    "/v1/..%2Fsleep%0A", "//sleep%0A"])
def test_every_development_endpoint_with_a_final_line_feed_is_refused(standin, bridge, path):
    for method in ("POST", "GET"):
        status, _, raw = request(bridge.port, method, path, {})
        assert status == 403 and "development endpoints" in json.loads(raw)["error"]["message"], (path, raw)


@pytest.mark.parametrize("path", ["/proxy/sleep", "/proxy/sleep%0A", "/proxy/collective_rpc", "/proxy/wake_up/",
                                  "/sleep%0A"])
def test_with_vllms_root_path_the_prefixed_development_endpoints_are_refused(standin, rooted, path):
    status, _, raw = request(rooted.port, "POST", path, {})
    assert status == 403, (path, raw)


@pytest.mark.parametrize("path", ["/v1/chat/completions%0A", "/v1/chat%2Fcompletions%0a"])
def test_a_generation_path_with_a_final_line_feed_is_a_generation_request(standin, bridge, path):
    """vLLM runs chat completions for it: the bridge heartbeats it as one (the stand-in routes as Starlette does)."""
    status, _, raw = request(bridge.port, "POST", path, {"model": "ornith", "stream": True}, {"x-standin-delay": "1.2"})
    assert status == 200 and raw.startswith(b": keep-alive\n\n") and raw.endswith(b"data: [DONE]\n\n"), raw[:200]


def test_the_launcher_hands_vllms_root_path_to_the_bridge():
    from entrypoint.contract import bridge_argv

    assert routes.root_path_of(["vllm", "serve", "--root-path", "/a", "--root_path=/b"]) == "/b"
    assert bridge_argv("py", 1, "http://x", 1.0, (), "/b")[-1] == "--root-path=/b"
