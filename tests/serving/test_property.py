"""Property: whatever request line, headers and body a client sends, the running bridge answers no 5xx
of its own, logs no traceback, connects to nothing but vLLM, and keeps its memory bounded.

Hypothesis generates the requests, derandomized (the same cases in CI every run; PREBAKE_FUZZ_RANDOM=1
explores new ones). Each goes over a raw socket to a bridge in front of the stand-in vLLM; targets
name a listener that records any connection the bridge makes elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from prebake_testing.net import free_port, wait_for_port, wait_healthy  # noqa: E402
from prebake_testing.rawhttp import Listener, exchange, status_of  # noqa: E402
from prebake_testing.servers import BRIDGE  # noqa: E402

EXAMPLES = int(os.environ.get("PREBAKE_BRIDGE_EXAMPLES", "120"))
RSS_LIMIT_KIB = 200 * 1024
ELSEWHERE = Listener()  # module-wide: hypothesis draws its port into targets


@pytest.fixture(scope="module")
def bridge(standin, tmp_path_factory):
    log = tmp_path_factory.mktemp("property") / "bridge.log"
    port = free_port()
    with open(log, "wb") as sink:  # a file, not a pipe: hundreds of refusal lines must never block the bridge
        process = subprocess.Popen([sys.executable, str(BRIDGE), "--host", "127.0.0.1", "--port", str(port),
                                    "--upstream", f"http://127.0.0.1:{standin.port}", "--heartbeat", "0.5",
                                    "--head-timeout", "0.5", "--body-timeout", "0.5"],
                                   stdout=subprocess.DEVNULL, stderr=sink, env={**os.environ, "VLLM_API_KEY": ""})
    wait_for_port(port, process, "the bridge")
    wait_healthy(port, process, timeout=10)
    yield port, process
    process.terminate()
    process.wait(10)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "Exception in ASGI" not in text, text[-3000:]
    ELSEWHERE.close()
    assert ELSEWHERE.connections == 0


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmRSS:")))


TOKEN = st.text("abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=12)
PATHS = st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses", "/health",
                         "/v1/models", "/metrics", "/tokenize", "/v1/messages/count_tokens", "/", "/v1/models/"])
ODD_TARGETS = st.sampled_from(["*", "*@127.0.0.1:{p}/v1/models", "http://127.0.0.1:{p}/v1/models",
                               "127.0.0.1:{p}", "//127.0.0.1:{p}/x", "@127.0.0.1:{p}", "http://u@127.0.0.1:{p}/",
                               "/%2e%2e/%2e%2e/{p}", "/v1/models#@127.0.0.1:{p}", "/\\\\127.0.0.1:{p}/x"])
TARGETS = st.one_of(PATHS, PATHS.flatmap(lambda p: st.builds(lambda q: p + "?" + q, TOKEN)),
                    ODD_TARGETS.map(lambda t: t.replace("{p}", str(ELSEWHERE.port))),
                    st.binary(min_size=1, max_size=30).filter(lambda b: b" " not in b and b"\r" not in b
                                                              and b"\n" not in b).map(lambda b: b.decode("latin-1")))
STREAM = st.one_of(st.booleans(), st.none(), st.integers(-2, 2), st.sampled_from(["yes", "no", "True", "", "1.0"]),
                   st.lists(st.booleans(), max_size=2))
JSON_BODY = st.fixed_dictionaries({"model": st.just("ornith")}, optional={
    "stream": STREAM, "messages": st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": st.text()}),
                                           max_size=2), "max_tokens": st.integers(-5, 5)}).map(
    lambda d: json.dumps(d).encode())
BODIES = st.one_of(JSON_BODY, st.binary(max_size=300), st.just(b"[" * 5000), st.just(b'{"stream": true' + b"," * 100))
HEADER_NAMES = st.sampled_from(["content-type", "transfer-encoding", "content-length", "host", "expect", "connection",
                                "upgrade", "x-forwarded-for", "authorization", "x-api-key", "te", "trailer",
                                "x-standin-delay", "x-standin-break", "forwarded", "accept-encoding"]) | TOKEN
HEADER_VALUES = st.one_of(st.sampled_from(["application/json", "text/plain", "chunked", "gzip", "close", "keep-alive",
                                           "websocket", "100-continue", "0.7", "1", "-1", "99999999999999999999"]),
                          st.text(max_size=20).map(lambda t: t.replace("\r", "").replace("\n", "")))


@st.composite
def raw_requests(draw) -> bytes:
    odd = draw(st.integers(0, 9)) == 0  # one request in ten has an odd method or version
    method = draw(TOKEN.map(str.upper) if odd else st.sampled_from(
        ["POST"] * 6 + ["GET"] * 3 + ["HEAD", "OPTIONS", "DELETE", "PUT", "PATCH", "CONNECT", "TRACE"]))
    target = draw(st.one_of(PATHS, PATHS, ODD_TARGETS.map(lambda t: t.replace("{p}", str(ELSEWHERE.port))), TARGETS))
    version = draw(st.sampled_from(["HTTP/1.0", "HTTP/2", "HTTP/9.9", "", "http/1.1"]) if odd else st.just("HTTP/1.1"))
    body = draw(BODIES)
    headers = draw(st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=4))
    framing = draw(st.sampled_from(["length"] * 6 + ["short", "long", "chunked", "chunked-trailers", "none"]))
    head = [(b"host", b"pod.example")]
    if framing in ("length", "short", "long"):
        size = len(body) + {"length": 0, "short": -1, "long": 7}[framing]
        head.append((b"content-length", str(max(size, 0)).encode()))
        wire = body
    elif framing.startswith("chunked"):
        head.append((b"transfer-encoding", b"chunked"))
        wire = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n"
        wire += b"x-trailer: evil\r\nauthorization: Bearer forged\r\n\r\n" if framing == "chunked-trailers" else b"\r\n"
    else:
        wire = b""
    head += [(name.encode("utf-8"), value.encode("utf-8")) for name, value in headers]
    lines = [f"{method} {target} {version}".rstrip().encode("latin-1")] + [n + b": " + v for n, v in head]
    return b"\r\n".join(lines) + b"\r\n\r\n" + wire


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not os.environ.get("PREBAKE_FUZZ_RANDOM"),
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=raw_requests())
# Found by hand before the property existed: the target the bridge used to connect to, and a body whose
# json.loads raised RecursionError (a 500 and a traceback).
@example(data=f"GET *@127.0.0.1:{ELSEWHERE.port}/v1/models HTTP/1.1\r\nhost: x\r\n\r\n".encode())
@example(data=b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 200021\r\n\r\n"
              b'{"stream": true,"x":' + b"[" * 100000 + b"]" * 100000 + b"}")
def test_no_request_makes_the_bridge_fail(bridge, data):
    port, process = bridge
    raw = exchange(port, data, timeout=3)
    status = status_of(raw)
    head = raw.partition(b"\r\n\r\n")[0].lower()
    # A 5xx may only be vLLM's own, never the bridge's: the stand-in marks its answers, and its uvicorn's
    # own 500 carries `server: uvicorn`, a header the bridge never writes itself.
    assert status is None or status < 500 or b"\r\nx-standin: 1" in head or b"\r\nserver: uvicorn" in head, raw[:500]
    assert process.poll() is None
    assert rss_kib(process.pid) < RSS_LIMIT_KIB
