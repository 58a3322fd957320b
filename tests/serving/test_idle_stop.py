"""Idle stop (VL_IDLE_STOP) through the real launcher and bridge, with phased_vllm.py as vLLM and a local
stand-in of RunPod's REST API v2 (`POST /v2/pods/{id}/action`, its body checked against RunPod's schema where
that is at hand, prebake_testing/runpod_api.py) that accepts, refuses, redirects, rate-limits or is not there.
Idle times are fractions of a minute (0.05 = 3 s), so the tests take seconds."""

from __future__ import annotations

import json
import sys
import re
import threading
import time


from prebake_testing.net import free_port, get, request
from prebake_testing.pods import IDLE_MIN, IDLE_S, KEY, Pod
from prebake_testing.hosts import Launcher
from prebake_testing.runpod_api import POD_KEY, RunPodApi

STOP = {"action": "stop"}


def stops() -> list[dict]:
    """The stop requests RunPod's stand-in received (POST /v2/pods/{id}/action)."""
    return [call for call in RunPodApi.calls if call["method"] == "POST" and call["path"].endswith("/action")]


def idle_pod(tmp_path, rest_url: str, **env) -> Pod:
    return Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_IDLE_STOP": IDLE_MIN, "RUNPOD_API_KEY": POD_KEY,
                          "RUNPOD_REST_URL": rest_url, **env})


BACKOFF_S = 0.25  # the first backoff in the plan of a bridge run alone (the launcher's: 2 s, tested below)


class Alone:
    """The bridge run alone, as the launcher starts it, in front of the stand-in vLLM (serving from the start), on
    the launcher's own plan (VL_IDLE_STOP=IDLE_MIN) but for its first backoff, BACKOFF_S: the backoffs' arithmetic
    without seconds of sleep."""

    def __init__(self, tmp_path, rest_url: str) -> None:
        from prebake_testing.runstate import write_state
        from prebake_testing.servers import BRIDGE, Server, StandIn

        env = write_state(tmp_path / "run", {"VL_IDLE_STOP": IDLE_MIN, "RUNPOD_POD_ID": "testpod",
                                             "RUNPOD_API_KEY": POD_KEY, "RUNPOD_REST_URL": rest_url})
        state_file = tmp_path / "run" / "state.json"
        state = json.loads(state_file.read_text())
        state["observe"]["idle_stop"]["retry_first_s"] = BACKOFF_S
        state_file.write_text(json.dumps(state))
        self.vllm = StandIn()
        self.port = free_port()
        self.bridge = Server([sys.executable, str(BRIDGE), "--host", "127.0.0.1", "--port", str(self.port),
                              "--upstream", f"http://127.0.0.1:{self.vllm.port}"], self.port, "the bridge",
                             env={**env, "VLLM_API_KEY": KEY, "VL_IDLE_STOP": "off", "RUNPOD_POD_ID": ""})

    def idle_stop(self) -> dict:
        return get(self.port, "/prebake/status", {"authorization": f"Bearer {KEY}"})[2]["idle_stop"]

    def wait_for(self, what, timeout: float, message: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.bridge.process.poll() is None:
            found = what()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{message}\n{self.stop()[-3000:]}")

    def stop(self) -> str:
        """The bridge's stderr."""
        err = self.bridge.stop()
        self.vllm.stop()
        return err


def serve(pod: Pod) -> None:
    for step in range(1, 5):
        pod.go(step)
    pod.wait_phase("serving")


def wait_for(what, timeout: float, pod: Pod, message: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        if pod.process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{message}\n{pod.stop()[2][-3000:]}")


def ask(pod: Pod, delay: float = 0) -> int:
    return request(pod.port, "POST", "/v1/chat/completions", {"model": "ornith", "stream": True},
                   {"authorization": f"Bearer {KEY}", "x-standin-delay": str(delay)})[0]


class Pollers:
    """What must never keep a pod awake, polled all along: /health, /metrics, vLLM's other monitoring paths and the
    status page (with the key), and a request without the key (refused)."""

    def __init__(self, pod: Pod) -> None:
        self.pod, self.done, self.refused = pod, threading.Event(), []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        key = {"authorization": f"Bearer {KEY}"}
        while not self.done.is_set():
            for path in ("/health", "/metrics", "/ping", "/load", "/version", "/prebake/status", "/prebake/status.txt"):
                get(self.pod.port, path, key)
            self.refused.append(request(self.pod.port, "POST", "/v1/chat/completions", {"model": "ornith"})[0])
            time.sleep(0.1)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(10)


def test_an_idle_pod_asks_runpod_to_stop_it_and_serves_until_stopped(tmp_path, runpod):
    pod = idle_pod(tmp_path, runpod)
    pollers = Pollers(pod)
    try:
        # Loading for longer than the idle time: vLLM still starting keeps the pod awake.
        pod.go(1)
        wait_for(lambda: pod.status()[1]["uptime_s"] >= IDLE_S + 1, 15, pod, "the pod did not stay up")
        idle = pod.status()[1]["idle_stop"]
        assert idle["idle_s"] is None and idle["awake"] == "vLLM is not serving yet" and not RunPodApi.calls
        for step in range(2, 5):
            pod.go(step)
        pod.wait_phase("serving")
        # A request longer than the idle time keeps it awake while it runs, and the clock restarts at its end.
        result = {}
        slow = threading.Thread(target=lambda: result.setdefault("code", ask(pod, delay=IDLE_S + 1.5)))
        slow.start()
        wait_for(lambda: pod.status()[1]["idle_stop"]["awake"] == "1 request(s) running", 5, pod, "not awake")
        slow.join(20)
        ended = time.monotonic()
        assert result["code"] == 200 and not RunPodApi.calls
        status = pod.status()[1]["idle_stop"]
        assert status["idle_s"] < IDLE_S and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", status["stops_at"])
        assert b"idle stop: idle" in pod.status(path="/prebake/status.txt")[1]
        wait_for(lambda: RunPodApi.calls, 15, pod, "RunPod was never asked to stop the pod")
        [call] = RunPodApi.calls
        assert call["path"] == "/v2/pods/testpod/action" and call["auth"] == f"Bearer {POD_KEY}"
        assert call["body"] == STOP
        assert call["at"] - ended >= IDLE_S - 0.2  # the pollers never reset the clock, the request did
        assert pollers.refused and set(pollers.refused) == {401}
        # RunPod accepted; until it stops the container, the pod serves on.
        assert ask(pod) == 200
        page = wait_for(lambda: (found := pod.status()[1])["idle_stop"]["stop_requested_at"] and found, 5, pod,
                        "RunPod's answer never reached the page")
        assert page["phase"] == "serving"
        assert POD_KEY not in json.dumps(page)
    finally:
        pollers.stop()
        code, _, err = pod.stop()  # RunPod stopping the container: SIGTERM through tini
    assert code == 143, err[-3000:]
    assert POD_KEY not in err and POD_KEY not in (pod.run_dir / "vllm.log").read_text()
    said = [line for line in err.splitlines() if "idle stop:" in line]
    accepted = next(n for n, line in enumerate(said) if "RunPod accepted the stop of pod testpod" in line)
    assert re.search(r"no request for 1\.\d s; unless one comes, this pod asks RunPod to stop it in 1\.\d s, at "
                     r"\S+Z \(VL_IDLE_STOP=0.05\)$", said[accepted - 1]), said  # half way, under 2 minutes
    assert not any("unless one comes" in a and "unless one comes" in b for a, b in zip(said, said[1:])), said
    assert "attempt 1, 200" in err and "the pod serves on until RunPod stops it" in err
    assert "idle-stop: after 0.05 min without a request: POST " + runpod + '/pods/testpod/action {"action": "stop"}' \
        in err


def test_a_failing_runpod_api_is_retried_with_backoff_and_never_shown_the_key(tmp_path, runpod):
    RunPodApi.script = [500, 401, 200]
    pod = Alone(tmp_path, runpod)
    try:
        pod.wait_for(lambda: len(RunPodApi.calls) >= 3, 30, "RunPod was not asked three times")
        first, second, third = (call["at"] for call in RunPodApi.calls[:3])
        assert second - first >= BACKOFF_S - 0.05 and third - second >= 2 * BACKOFF_S - 0.05  # the first, then twice
        assert request(pod.port, "POST", "/v1/chat/completions", {"model": "ornith", "stream": True},
                       {"authorization": f"Bearer {KEY}"})[0] == 200  # the pod served on all along
        idle = pod.wait_for(lambda: (found := pod.idle_stop())["stop_requested_at"] and found, 5,
                            "RunPod's answer never reached the page")
        assert idle["attempts"] == 3 and idle["last_error"] is None
    finally:
        err = pod.stop()
    assert POD_KEY not in err
    lines = [line for line in err.splitlines() if "idle stop: asking RunPod" in line or "RunPod accepted" in line]
    assert len(lines) == 3, err[-3000:]  # one line per attempt
    assert "attempt 1: RunPod answered 500 (Internal Server Error: upstream failure)" in lines[0], lines[0]
    assert f"next attempt in {BACKOFF_S:g} s" in lines[0]
    assert "attempt 2: RunPod answered 401 (Unauthorized: " in lines[1]  # the redactor masks what follows "bearer"
    assert f"next attempt in {2 * BACKOFF_S:g} s" in lines[1]
    assert "is RUNPOD_API_KEY this pod's key?" in lines[1]
    assert "attempt 3, 200" in lines[2]


def test_the_launchers_plan_backs_off_2_s_first(tmp_path):
    """The plan the launcher writes (the tests above shorten it in a plan of their own): 2 s, then twice as long."""
    from entrypoint.serving import podstop

    from prebake_testing.runstate import write_state

    write_state(tmp_path, {"VL_IDLE_STOP": IDLE_MIN, "RUNPOD_POD_ID": "testpod", "RUNPOD_API_KEY": POD_KEY})
    plan = json.loads((tmp_path / "state.json").read_text())["observe"]["idle_stop"]
    assert plan["retry_first_s"] == 2.0
    stopper = podstop.PodStopper(plan, {}, podstop.Activity(), lambda: None, print, str)
    assert stopper.retry_first_s == 2.0
    for odd in (0, -1, True, "2", 301, float("nan")):  # state.json is a file: anything else is the default
        assert podstop.PodStopper({**plan, "retry_first_s": odd}, {}, podstop.Activity(), lambda: None, print,
                                  str).retry_first_s == 2.0, odd


def test_an_unreachable_api_costs_log_lines_and_a_request_cancels_the_stop(tmp_path):
    pod = idle_pod(tmp_path, f"http://127.0.0.1:{free_port()}/v2")
    try:
        serve(pod)
        wait_for(lambda: "attempt 1: the call failed" in json.dumps(pod.status()[1]["idle_stop"]["last_error"] or "")
                 or pod.status()[1]["idle_stop"]["attempts"] >= 1, 15, pod, "no attempt")
        assert ask(pod) == 200  # during the 2 s backoff: the stop is called off
        asked = time.monotonic()
        status = pod.status()[1]["idle_stop"]
        assert status["attempts"] == 1 and "the call failed (ClientConnectorError" in status["last_error"]
        # The clock starts again from the request: the next attempt comes a whole idle time later.
        wait_for(lambda: pod.status()[1]["idle_stop"]["attempts"] >= 2, 15, pod, "no second attempt")
        assert time.monotonic() - asked >= IDLE_S - 0.2
    finally:
        code, _, err = pod.stop()
    assert code == 143 and "Traceback" not in err
    assert re.search(r"idle stop: (a request came in|1 request\(s\) running); not stopping the pod", err), err[-3000:]


def test_a_redirect_is_a_failure_never_followed(tmp_path, runpod):
    """RunPod answers 302: the stop is not sent as a GET to the Location (aiohttp's default), the key does not go
    there, the attempt counts as failed, and the next one, after the backoff, is a POST again."""
    RunPodApi.script = [302, 200]
    pod = Alone(tmp_path, runpod)
    try:
        pod.wait_for(lambda: len(stops()) >= 2, 30, "RunPod was not asked twice")
        assert stops()[1]["at"] - stops()[0]["at"] >= BACKOFF_S - 0.05  # the backoff, as after any failure
        assert [call["method"] for call in RunPodApi.calls] == ["POST", "POST"], RunPodApi.calls  # nothing elsewhere
        pod.wait_for(lambda: pod.idle_stop()["attempts"] == 2, 5, "the second answer was not counted")
    finally:
        err = pod.stop()
    lines = [line for line in err.splitlines() if "idle stop: asking RunPod" in line or "RunPod accepted" in line]
    assert f"attempt 1: RunPod answered 302, a redirect to '{RunPodApi.redirect_to}', not followed" in lines[0], lines
    assert "attempt 2, 200" in lines[1]


def test_a_rate_limit_waits_as_long_as_retry_after_says(tmp_path, runpod):
    RunPodApi.script = [(429, {"Retry-After": "1"}), 200]
    pod = Alone(tmp_path, runpod)
    try:
        pod.wait_for(lambda: len(stops()) >= 2, 30, "RunPod was not asked twice")
        assert stops()[1]["at"] - stops()[0]["at"] >= 0.95  # Retry-After's 1 s, not the first backoff's 0.25 s
    finally:
        err = pod.stop()
    assert "attempt 1: RunPod answered 429 (Too Many Requests: upstream failure); the pod serves on, next attempt in " \
           "1 s (Retry-After: 1 s)" in err, err[-3000:]


def test_a_request_during_the_backoff_calls_the_stop_off_whenever_it_comes(runpod):
    """RunPod answers 500 then 200, and a request starts during the backoff, after the last look at the clock: the
    stop is not sent (the stopper looks again right before every attempt). tick_s as long as the backoff stands
    for the last stretch of a real one (a second, with an idle time of a minute or more) that no look covered."""
    import asyncio

    from entrypoint.serving import podstop

    RunPodApi.script = [500, 200]
    lines: list[str] = []
    activity = podstop.Activity()
    stopper = podstop.PodStopper({"after_s": 0.2, "pod_id": "p", "stop_url": f"{runpod}/pods/p/action",
                                  "retry_first_s": BACKOFF_S},
                                 {"RUNPOD_API_KEY": POD_KEY}, activity, lambda: None, lines.append, str)
    stopper.tick_s = stopper.retry_first_s + 1

    async def until(condition, what: str) -> None:
        deadline = time.monotonic() + 15
        while not condition():
            assert time.monotonic() < deadline, f"{what}: {lines}"
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        task = asyncio.create_task(stopper.run())
        try:
            await until(lambda: any("attempt 1: RunPod answered 500" in line for line in lines), "no first attempt")
            activity.enter()  # the stopper is in its backoff now: it logged, looked at the clock, and sleeps
            await until(lambda: any("not stopping the pod" in line or "accepted" in line for line in lines),
                        "neither called off nor sent")
            assert len(stops()) == 1 and stops()[0]["body"] == STOP, lines
            assert lines[-1] == "idle stop: 1 request(s) running; not stopping the pod"
        finally:
            task.cancel()
            activity.leave()

    asyncio.run(scenario())


def test_idle_stop_decisions(tmp_path):
    launcher = Launcher(tmp_path)

    def decision(env: dict) -> dict:
        result = launcher.plan("h200_580", env=env)
        assert POD_KEY not in result.stdout
        [found] = result.decision("idle-stop")
        return {**found, "plan": result.plan["observe"] and result.plan["observe"]["idle_stop"]}

    assert decision({})["decision"] == "off" and "VL_IDLE_STOP from default" in decision({})["why"]
    assert decision({"VL_IDLE_STOP": "off", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": POD_KEY})["decision"] == "off"
    assert decision({"VL_IDLE_STOP": "0", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": POD_KEY})["decision"] == "off"
    not_runpod = decision({"VL_IDLE_STOP": "30", "RUNPOD_API_KEY": POD_KEY})
    assert not_runpod["decision"] == "off: VL_IDLE_STOP=30 but RUNPOD_POD_ID is unset (not on RunPod)"
    no_key = decision({"VL_IDLE_STOP": "30", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": "  "})
    assert no_key["decision"] == "off: warning: VL_IDLE_STOP=30 but RUNPOD_API_KEY is unset" and no_key["plan"] is None
    on = decision({"VL_IDLE_STOP": "2.5", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": POD_KEY + "\n"})
    assert on["decision"] == 'after 2.5 min without a request: POST https://api.runpod.io/v2/pods/abc/action ' \
        '{"action": "stop"}'
    assert on["plan"] == {"after_s": 150.0, "pod_id": "abc", "stop_url": "https://api.runpod.io/v2/pods/abc/action",
                          "retry_first_s": 2.0}
    bridgeless = decision({"VL_IDLE_STOP": "30", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": POD_KEY, "VL_BRIDGE": "off"})
    assert bridgeless["decision"].startswith("off: warning: VL_IDLE_STOP=30 needs the keep-alive bridge")
    on_runpod = {"RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": POD_KEY}
    for env, needle in (({"VL_IDLE_STOP": "-1"}, "VL_IDLE_STOP='-1'"),
                        ({"VL_IDLE_STOP": "soon"}, "VL_IDLE_STOP='soon'"),
                        ({"VL_IDLE_STOP": "1e3"}, "VL_IDLE_STOP='1e3'"), ({"VL_IDLE_STOP": "20000"}, "at most 10080"),
                        ({"VL_IDLE_STOP": "30", "RUNPOD_REST_URL": "http://rest.example.com/v1", **on_runpod},
                         "RUNPOD_REST_URL='http://rest.example.com/v1'"),
                        ({"VL_IDLE_STOP": "30", "RUNPOD_REST_URL": "ftp://x/v2", **on_runpod}, "RUNPOD_REST_URL"),
                        # v1 is retired: refused at start, before any stop could be sent there
                        ({"VL_IDLE_STOP": "30", "RUNPOD_REST_URL": "https://rest.runpod.io/v1", **on_runpod},
                         "RUNPOD_REST_URL='https://rest.runpod.io/v1' (where VL_IDLE_STOP=30 sends the stop request) "
                         "is not valid: RunPod's REST API v1 is retired"),
                        ({"VL_IDLE_STOP": "30", "RUNPOD_REST_URL": "https://api.runpod.io", **on_runpod},
                         "its path ends in /v2"),
                        ({"VL_IDLE_STOP": "30", "RUNPOD_POD_ID": "../templates", "RUNPOD_API_KEY": POD_KEY},
                         "RUNPOD_POD_ID='../templates'"),
                        ({"VL_IDLE_STOP": "30", "RUNPOD_POD_ID": "abc", "RUNPOD_API_KEY": "rpa_ab cd"},
                         "RUNPOD_API_KEY holds white space at character 7 of 9")):
        bad = launcher.run("h200_580", env=env)
        assert bad.rc == 2 and needle in bad.stderr and "rpa_ab" not in bad.stderr, bad.stderr


def test_a_page_without_the_key_shows_when_the_pod_stops_but_not_the_apis_errors(tmp_path):
    pod = Pod(tmp_path, {"VL_IDLE_STOP": IDLE_MIN, "RUNPOD_API_KEY": POD_KEY,
                         "RUNPOD_REST_URL": f"http://127.0.0.1:{free_port()}/v2"})
    try:
        for step in range(1, 5):
            pod.go(step)
        pod.wait_phase("serving", key=None)
        page = wait_for(lambda: (found := pod.status(key=None)[1])["idle_stop"]["idle_s"] is not None and found,
                        10, pod, "never idle")
        assert set(page["idle_stop"]) == {"after_s", "idle_s", "awake", "stops_at", "stop_requested_at"}
        assert page["idle_stop"]["after_s"] == IDLE_S and "more" in page
    finally:
        pod.stop()


def test_the_bridge_run_alone_stops_the_pod_on_the_plan_in_the_state_file(tmp_path, runpod):
    """Without the launcher (the bridge started by hand), the plan the launcher would write turns idle stop on; the
    key comes from the bridge's environment, as it does from the launcher's."""
    from prebake_testing.runstate import write_state
    from prebake_testing.servers import BRIDGE, Server, StandIn

    vllm = StandIn()
    port = free_port()
    state = write_state(tmp_path / "run", {"VL_IDLE_STOP": IDLE_MIN, "RUNPOD_POD_ID": "alone",
                                           "RUNPOD_API_KEY": POD_KEY, "RUNPOD_REST_URL": runpod})
    bridge = Server([sys.executable, str(BRIDGE), "--host", "127.0.0.1", "--port", str(port),
                     "--upstream", f"http://127.0.0.1:{vllm.port}"], port, "the bridge",
                    env={"VLLM_API_KEY": "", **state, "VL_IDLE_STOP": "off", "RUNPOD_POD_ID": "",
                         "RUNPOD_API_KEY": POD_KEY})
    try:
        deadline = time.monotonic() + 15
        while not RunPodApi.calls and time.monotonic() < deadline and bridge.process.poll() is None:
            time.sleep(0.05)
        assert RunPodApi.calls and RunPodApi.calls[0]["path"] == "/v2/pods/alone/action"
        deadline = time.monotonic() + 5
        while not get(port, "/prebake/status")[2]["idle_stop"]["stop_requested_at"]:
            assert time.monotonic() < deadline, "RunPod's answer never reached the page"
            time.sleep(0.05)
    finally:
        err = bridge.stop()
        vllm.stop()
    assert POD_KEY not in err and "RunPod accepted the stop of pod alone" in err


def test_the_stop_is_announced_a_minute_ahead(monkeypatch):
    """With a real idle time (30 min) on a fake clock: one line at 29 min, none before, none twice."""
    from entrypoint.serving import podstop

    clock = {"now": 1000.0}

    class FakeTime:
        @staticmethod
        def monotonic() -> float:
            return clock["now"]

        @staticmethod
        def time() -> float:
            return 1_800_000_000 + clock["now"]

    monkeypatch.setattr(podstop, "time", FakeTime)

    async def no_sleep(_seconds) -> None:
        return None

    monkeypatch.setattr(podstop.asyncio, "sleep", no_sleep)
    lines: list[str] = []
    activity = podstop.Activity()
    stopper = podstop.PodStopper({"after_s": 1800.0, "pod_id": "p", "stop_url": "http://127.0.0.1:9/v2/pods/p/action"},
                                 {"RUNPOD_API_KEY": POD_KEY}, activity, lambda: None, lines.append, str)

    async def at(seconds: float) -> None:
        clock["now"] = 1000.0 + seconds
        await stopper.step()

    async def scenario() -> None:
        await at(0)
        await at(1739)
        assert lines == []
        await at(1740)
        await at(1750)
        assert len(lines) == 1 and "asks RunPod to stop it in 60 s" in lines[0]
        activity.enter()
        await at(1760)
        assert lines[-1].endswith("idle stop: 1 request(s) running; the pod stays up")
        clock["now"] = 1000.0 + 1770
        activity.leave()  # the request ends between two ticks: the clock starts from its end, not the next tick
        await at(1770 + 1739)
        assert len(lines) == 2
        await at(1770 + 1741)
        assert len(lines) == 3 and "in 59 s" in lines[-1]

    import asyncio

    asyncio.run(scenario())


def test_runpods_escapes_and_an_echoed_key_never_reach_the_page_or_the_log(tmp_path):
    """Issue 47: the idle stop's last error was stored and printed raw on /prebake/status.txt, which people read with
    curl in a terminal; RunPod's problem here carries terminal escapes and echoes the key across the cut."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    escapes = "\x1b]0;owned\x07\x1b[2J\x9b31m"
    body = json.dumps({"title": f"Bad{escapes}", "status": 500,
                       "detail": "d" * 150 + POD_KEY + f" {POD_KEY[:12]} {escapes}"}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.send_response(500)
            self.send_header("Content-Type", "application/problem+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pod = idle_pod(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/v2")
    try:
        serve(pod)
        idle = wait_for(lambda: (found := pod.status()[1]["idle_stop"])["last_error"] and found, 20, pod,
                        "RunPod's refusal never reached the page")
        text = pod.status(path="/prebake/status.txt")[1].decode()
    finally:
        _, _, err = pod.stop()
        server.shutdown()
    assert "RunPod answered 500 (Bad\\x1b]0;owned\\x07\\x1b[2J\\x9b31m: ddd" in idle["last_error"], idle
    assert "last attempt: RunPod answered 500 (Bad\\x1b]0;owned" in text, text
    for shown in (json.dumps(idle, ensure_ascii=False), text, err):
        assert not any(char in shown for char in "\x1b\x07\x9b"), repr(shown[-2000:])
        assert not any(POD_KEY[start:start + 8] in shown for start in range(len(POD_KEY) - 7)), shown[-2000:]
