"""The router pod (routerpod/router.py: nginx) in front of three real pods (the launcher, the bridge, a stand-in
vLLM): sessions stick, a stopped or loading pod's sessions move on with no error, a pod joins without a restart,
heartbeats pass, one key at the router and the pods' key never leaves it. And why not vLLM's router: the real
vllm-router 0.1.17 binary, in front of stand-in vLLMs, on the traffic Claude Code sends."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from routerpod import router as config
from prebake_testing.net import free_port, get, request, wait_for_port, wait_until
from prebake_testing.pods import KEY as PODS_KEY, Pod
from prebake_testing.router import ROUTER_KEY, Router
from prebake_testing.servers import StandIn

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (.ci/run installs it)")
SESSIONS = [f"7d9e{i:04d}-5b1c-4a57-9f0e-claude{i:05d}" for i in range(12)]
MESSAGE = {"model": "claude-sonnet-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hello"}]}


def serving_pod(tmp_path: Path, name: str, env: dict | None = None, steps: int = 4) -> Pod:
    pod = Pod(tmp_path / name, {"VLLM_API_KEY": PODS_KEY, **(env or {})})
    for step in range(1, steps + 1):
        pod.go(step)
    if steps == 4:
        pod.wait_phase("serving")
    return pod


def url(pod: Pod) -> str:
    return f"http://127.0.0.1:{pod.port}"


def ask(router: Router, session: str | None, body: dict | None = None, path: str = "/v1/messages?beta=true",
        headers: dict | None = None) -> tuple[int, dict, bytes]:
    head = {"authorization": f"Bearer {ROUTER_KEY}", "anthropic-version": "2023-06-01", **(headers or {})}
    if session:
        head["x-claude-code-session-id"] = session
    return request(router.port, "POST", path, body or MESSAGE, head)


def by_port(pods: list[Pod]) -> dict[int, Pod]:
    return {pod.port: pod for pod in pods}


def pod_of(router: Router, head: dict) -> int:
    """Which pod answered (its port here): the router names the pod's host and port in X-Prebake-Pod."""
    return int(head["x-prebake-pod"].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("team")
    pods = [serving_pod(tmp, name) for name in ("a", "b", "c")]
    router = Router(tmp, [url(pod) for pod in pods], free_port())
    yield router, pods
    router.stop()
    for pod in pods:
        pod.stop()


def test_a_session_stays_on_one_pod_and_sessions_spread(team):
    router, pods = team
    placed = {}
    for turn in range(3):
        for session in SESSIONS[turn:] + SESSIONS[:turn]:  # a new order each turn: round robin would move them
            status, head, body = ask(router, session, {**MESSAGE, "stream": turn % 2 == 1})
            assert status == 200, body
            placed.setdefault(session, set()).add(pod_of(router, head))
    assert all(len(where) == 1 for where in placed.values()), placed
    # sessions spread over all three pods (60 of them: ketama's arcs are uneven, a pod may get none of 12)
    spread = {pod_of(router, ask(router, f"spread-{n}")[1]) for n in range(60)}
    assert spread == {pod.port for pod in pods}, spread
    # count_tokens goes where its session's messages go (the same pod's tokenizer and model)
    for session in SESSIONS[:4]:
        status, head, body = ask(router, session, path="/v1/messages/count_tokens?beta=true")
        assert status == 200 and "input_tokens" in json.loads(body)
        assert {pod_of(router, head)} == placed[session]


def test_answers_pass_through_unchanged(team):
    """Whatever a pod answers (a message, a stream, count_tokens, vLLM's over-long 400, Claude Code's names) the
    client gets byte for byte through the router."""
    router, pods = team
    session = SESSIONS[0]
    pod = by_port(pods)[pod_of(router, ask(router, session)[1])]
    cases = [(MESSAGE, "/v1/messages?beta=true", {}), ({**MESSAGE, "stream": True}, "/v1/messages?beta=true", {}),
             (MESSAGE, "/v1/messages/count_tokens?beta=true", {}),
             ({**MESSAGE, "model": "claude-opus-5-5"}, "/v1/messages?beta=true", {"x-standin-error": "400"})]
    for n, (body, path, extra) in enumerate(cases):
        extra = {**extra, "x-standin-id": f"same-{n}"}  # the stand-in's answer then carries the same id both times
        direct = request(pod.port, "POST", path, body, {"authorization": f"Bearer {PODS_KEY}", **extra})
        routed = ask(router, session, body, path, extra)
        assert (routed[0], routed[2]) == (direct[0], direct[2]), (path, routed, direct)
        assert routed[1]["content-type"] == direct[1]["content-type"]
    assert b"maximum context length" in routed[2] and routed[0] == 400


def test_one_key_at_the_router_and_the_pods_key_never_leaves_it(team):
    router, pods = team
    echo = lambda headers: request(router.port, "POST", "/_standin/echo", b"{}", headers)  # noqa: E731
    refused = [echo({}), echo({"authorization": "Bearer " + ROUTER_KEY.upper()}), echo({"x-api-key": "nope"}),
               echo({"x-api-key": ROUTER_KEY.upper()}),  # nginx's plain maps would take it
               echo({"authorization": f"Bearer {PODS_KEY}"})]  # the pods' key is no key of the router's
    for status, head, body in refused:
        assert status == 401 and head["x-should-retry"] == "false", (status, head)
        assert json.loads(body)["error"]["type"] == "authentication_error"
    for accepted in ({"authorization": f"Bearer {ROUTER_KEY}"}, {"x-api-key": ROUTER_KEY}):
        status, head, body = echo(accepted)
        assert status == 200, body
        seen = dict(json.loads(body)["headers"])
        assert seen["authorization"] == f"Bearer {PODS_KEY}" and "x-api-key" not in seen  # the pod's key, alone
        assert ROUTER_KEY not in body.decode() and PODS_KEY not in json.dumps(dict(head))
    # and a pod refuses the router's key: a client who has it cannot go around the router
    assert request(pods[0].port, "POST", "/v1/messages", MESSAGE, {"authorization": f"Bearer {ROUTER_KEY}"})[0] == 401


def test_heartbeats_come_through_before_the_first_token(team):
    """A prefill longer than RunPod's cut: the pod's bridge beats every 0.5 s, and the router passes each beat on
    at once (no buffering), so the client hears from the pod long before the first token."""
    router, pods = team
    connection = http.client.HTTPConnection("127.0.0.1", router.port, timeout=30)
    connection.request("POST", "/v1/messages?beta=true", json.dumps({**MESSAGE, "stream": True}),
                       {"authorization": f"Bearer {ROUTER_KEY}", "content-type": "application/json",
                        "x-claude-code-session-id": SESSIONS[1], "x-standin-delay": "3"})
    started = time.monotonic()
    response = connection.getresponse()
    arrivals, data = [], b""
    while chunk := response.read1(65536):
        arrivals.append((time.monotonic() - started, chunk))
        data += chunk
    connection.close()
    pings = [at for at, chunk in arrivals if b"event: ping" in chunk and b"message_start" not in chunk]
    assert response.status == 200 and len(pings) >= 3, arrivals
    assert pings[0] < 1.5 and data.rstrip().endswith(b'{"type":"message_stop"}'), arrivals


def test_a_whole_answer_is_kept_alive_too(team):
    """Not streamed: the bridge sends the JSON answer's leading whitespace while vLLM prefills, and the router passes
    it on at once; the body is still one JSON message."""
    router, pods = team
    connection = http.client.HTTPConnection("127.0.0.1", router.port, timeout=30)
    connection.request("POST", "/v1/messages?beta=true", json.dumps(MESSAGE),
                       {"authorization": f"Bearer {ROUTER_KEY}", "content-type": "application/json",
                        "x-claude-code-session-id": SESSIONS[4], "x-standin-delay": "3"})
    started = time.monotonic()
    response = connection.getresponse()
    arrivals, data = [], b""
    while chunk := response.read1(65536):
        arrivals.append(time.monotonic() - started)
        data += chunk
    connection.close()
    assert response.status == 200 and arrivals[0] < 1.5 and arrivals[-1] > 2.5, arrivals
    assert json.loads(data)["type"] == "message"


def test_a_slow_answer_holds_up_no_other_session(team):
    router, pods = team
    slow, fast = SESSIONS[2], next(s for s in SESSIONS if s != SESSIONS[2])
    result = {}
    thread = threading.Thread(target=lambda: result.update(slow=ask(router, slow, headers={"x-standin-delay": "3"})))
    thread.start()
    started = time.monotonic()
    for _ in range(5):
        assert ask(router, fast)[0] == 200
    assert time.monotonic() - started < 2.5
    thread.join(20)
    assert result["slow"][0] == 200


def test_a_stopped_pod_moves_its_sessions_and_a_new_pod_joins_without_a_restart(tmp_path):
    pods = [serving_pod(tmp_path, name) for name in ("a", "b", "c")]
    router = Router(tmp_path, [url(pod) for pod in pods], free_port())
    try:
        placed = {s: pod_of(router, ask(router, s)[1]) for s in SESSIONS}
        victim = placed[SESSIONS[0]]
        by_port(pods)[victim].stop()
        # the victim's sessions: answered on another pod at the first try (no error to retry), and stay there
        for session in SESSIONS:
            status, head, body = ask(router, session)
            assert status == 200, body
            where = pod_of(router, head)
            assert where != victim and (placed[session] == victim or where == placed[session]), (session, placed)
            placed[session] = where
        # a fourth pod joins: the router reloads (no restart, a stream in flight finishes) and only some sessions move
        newcomer = serving_pod(tmp_path, "d")
        streaming = {}
        thread = threading.Thread(target=lambda: streaming.update(r=ask(
            router, SESSIONS[3], {**MESSAGE, "stream": True}, headers={"x-standin-delay": "2"})))
        thread.start()
        holder = by_port(pods)[placed[SESSIONS[3]]]
        wait_until(lambda: get(holder.port, "/_standin/active", {"authorization": f"Bearer {PODS_KEY}"})[2], 10,
                   "the stream held by its pod")
        reloaded = router.reload([url(newcomer)] + [url(pod) for pod in reversed(pods) if pod.port != victim])
        assert reloaded.returncode == 0, reloaded.stderr
        thread.join(20)
        assert streaming["r"][0] == 200 and streaming["r"][2].rstrip().endswith(b'{"type":"message_stop"}')
        assert router.process.poll() is None
        after = {}
        for session in SESSIONS:
            status, head, _ = ask(router, session)
            assert status == 200
            after[session] = pod_of(router, head)
        moved = [s for s in SESSIONS if after[s] != placed[s]]
        # consistent hashing, on names that a reordered list keeps: the sessions that move, move to the newcomer
        assert moved and all(after[s] == newcomer.port for s in moved), (placed, after)
        newcomer.stop()
    finally:
        router.stop()
        for pod in pods:
            pod.stop()


def test_a_pod_still_loading_gets_no_session(tmp_path):
    """A pod added before its model is up answers 503 (the bridge, while vLLM loads): the router goes on to the
    next pod, so a team can list a pod the moment it is created."""
    ready = serving_pod(tmp_path, "ready")
    loading = serving_pod(tmp_path, "loading", steps=1)
    router = Router(tmp_path, [url(loading), url(ready)], free_port())
    try:
        for session in SESSIONS:
            status, head, body = ask(router, session)
            assert status == 200 and pod_of(router, head) == ready.port, (status, body)
    finally:
        router.stop()
        ready.stop()
        loading.stop()


@pytest.mark.parametrize("env, names", [
    ({"PREBAKE_PODS": "", "PREBAKE_PODS_FILE": "/nonexistent"}, "PREBAKE_PODS"),
    ({"PREBAKE_PODS": "ftp://x"}, "PREBAKE_PODS"),
    ({"PREBAKE_PODS": "https://abc-8080.proxy.runpod.net/v1"}, "base URL only"),
    ({"PREBAKE_PODS": "https://a.example https://a.example"}, "more than once"),
    ({"PREBAKE_PODS": "https://a.example", "VLLM_API_KEY": ""}, "VLLM_API_KEY is not set"),
    ({"PREBAKE_PODS": "https://a.example", "VLLM_API_KEY": "has a space in it"}, "VLLM_API_KEY:"),
    ({"PREBAKE_PODS": "https://a.example", "PREBAKE_PODS_KEY": ROUTER_KEY}, "equals VLLM_API_KEY"),
    ({"PREBAKE_PODS": "https://a.example", "VL_PORT": "http"}, "VL_PORT="),
])
def test_bad_configuration_is_refused_by_name(tmp_path, env, names):
    full = {**os.environ, "PREBAKE_PODS_FILE": str(tmp_path / "none.txt"), "VLLM_API_KEY": ROUTER_KEY,
            "PREBAKE_ROUTER_DIR": str(tmp_path / "run"), **env}
    done = subprocess.run([sys.executable, str(config.__file__), "serve"], env=full, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == config.EXIT_CONFIG and names in done.stderr, done.stderr
    assert not (tmp_path / "run" / "nginx.conf").exists()


def test_https_pods_get_their_own_host_sni_and_verified_certificates(tmp_path):
    env = {"PREBAKE_PODS": "https://abc123-8080.proxy.runpod.net, https://def456-8080.proxy.runpod.net",
           "VLLM_API_KEY": ROUTER_KEY, "PREBAKE_PODS_KEY": PODS_KEY, "PREBAKE_ROUTER_DIR": str(tmp_path),
           "PREBAKE_PODS_FILE": str(tmp_path / "none")}
    text = config.render(config.config_from_env(env))
    for host in ("abc123-8080.proxy.runpod.net", "def456-8080.proxy.runpod.net"):
        assert f"set $prebake_pod https://{host};" in text and f"proxy_ssl_name {host};" in text
    assert text.count("proxy_ssl_verify on;") == 2 and text.count("resolver ") == 2
    (tmp_path / "nginx.conf").write_text(text)
    check = subprocess.run(["nginx", "-t", "-q", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr  # and no DNS asked at the start: a pod that does not resolve yet


# --- why not vLLM's router: the real binary, on Claude Code's traffic -------------------------------------------
@pytest.fixture
def vllm_router():
    binary = Path(sys.executable).with_name("vllm-router")
    if not binary.exists():
        pytest.fail("vllm-router is not installed: pip install -e '.[test]' installs it (pyproject.toml)")
    workers = [StandIn(), StandIn()]
    port = free_port()
    process = subprocess.Popen([str(binary), "--host", "127.0.0.1", "--port", str(port), "--policy", "consistent_hash",
                                "--prometheus-port", str(free_port()), "--worker-urls", *[w.url for w in workers]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_port(port, process, "vllm-router")
    wait_until(lambda: get(port, "/readiness")[0] == 200, 20, "vllm-router ready", process)
    yield port, workers
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
    for worker in workers:
        worker.stop()


def test_vllm_router_0_1_17_cannot_carry_claude_code(vllm_router):
    """On /v1/chat/completions it hashes X-Session-ID and forwards the headers; on Claude Code's /v1/messages (a
    path it has no route for) every session lands on one worker and every header is dropped, the key included.
    If this fails, a later vllm-router may carry Claude Code: docs/router.md says what to check before switching."""
    port, workers = vllm_router
    head = {"authorization": "Bearer k", "anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219"}
    for session in SESSIONS:
        status, _, body = request(port, "POST", "/_standin/echo", b"{}",
                                  {**head, "x-claude-code-session-id": session, "x-session-id": session})
        assert status == 200, body
        seen = dict(json.loads(body)["headers"])
        assert not {"authorization", "anthropic-version", "anthropic-beta", "x-claude-code-session-id"} & set(seen)
    for session in SESSIONS:
        assert request(port, "POST", "/v1/messages?beta=true", MESSAGE,
                       {**head, "x-claude-code-session-id": session})[0] == 200
    served = [sum(e["path"] == "/v1/messages" for e in w.events()) for w in workers]
    assert sorted(served) == [0, len(SESSIONS)], served
    for session in SESSIONS:  # the chat path is routed by session, with the headers
        request(port, "POST", "/v1/chat/completions", {"model": "ornith", "messages": [{"role": "user", "content": "x"}]},
                {**head, "x-session-id": session, "x-standin-id": session})
    chat = [{e["id"] for e in w.events() if e["path"] == "/v1/chat/completions"} for w in workers]
    assert all(chat) and set().union(*chat) == set(SESSIONS), chat


def test_traffic_through_the_router_keeps_its_pod_awake_and_no_other(tmp_path, runpod):
    """Idle stop per pod (VL_IDLE_STOP, 3 s here): the pod that serves a session through the router counts it as its
    traffic; the router sends nothing of its own, so the pod without a session stops itself."""
    from prebake_testing.runpod_api import POD_KEY as RUNPOD_KEY, RunPodApi

    idle = {"VL_IDLE_STOP": "0.05", "RUNPOD_API_KEY": RUNPOD_KEY, "RUNPOD_REST_URL": runpod}
    pods = [serving_pod(tmp_path, name, {**idle, "RUNPOD_POD_ID": f"{name}pod"}) for name in ("busy", "quiet")]
    router = Router(tmp_path, [url(pod) for pod in pods], free_port())
    try:
        session = next(s for s in (f"s{n}" for n in range(100)) if pod_of(router, ask(router, s)[1]) == pods[0].port)
        began = time.monotonic()
        while time.monotonic() - began < 6:  # twice the idle time
            assert ask(router, session)[0] == 200
            time.sleep(0.3)
        stops = [call["path"] for call in RunPodApi.calls]
        assert any("quietpod" in path for path in stops) and not any("busypod" in path for path in stops), stops
    finally:
        router.stop()
        for pod in pods:
            pod.stop()


def test_the_router_block_of_the_docs_starts_claude_code_with_the_routers_key_and_the_pins(team, tmp_path):
    """docs/router.md's step 5 once started `claude` with only the address and "$ROUTER_KEY" (never exported): no
    pins, no context. Its block is the generator's for the router: with ROUTER and ROUTER_KEY exported it checks the
    router with its key and starts Claude Code pinned to the pods' model; a wrong key is named before anything starts."""
    from entrypoint.claudecode import ROUTER, paste_block

    router, _ = team
    block = paste_block('"$ROUTER"', "ornith", 1_000_000, target=ROUTER)
    assert block in (Path(__file__).parents[2] / "docs" / "router.md").read_text().replace("\n   ", "\n")
    fake = 'claude() { echo "started $ANTHROPIC_BASE_URL $ANTHROPIC_AUTH_TOKEN $ANTHROPIC_MODEL"; }\n'
    for key, said in ((ROUTER_KEY, f"started http://127.0.0.1:{router.port} {ROUTER_KEY} ornith"),
                      ("not-the-router-key", "the router pod refused the key: ROUTER_KEY is not its key")):
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "ROUTER": f"http://127.0.0.1:{router.port}",
               "ROUTER_KEY": key}
        done = subprocess.run(["bash", "-c", fake + block], env=env, capture_output=True, text=True, timeout=30)
        assert said in done.stdout + done.stderr and (key == ROUTER_KEY) == (done.returncode == 0), done
