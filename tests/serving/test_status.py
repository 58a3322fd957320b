"""Seeing inside a pod, through the real launcher with a stand-in vLLM that starts like vLLM 0.27.1
(phased_vllm.py): the banner and timestamps, the status page phase by phase, the key it needs, secrets
kept out, the watchdog on a vLLM that hangs, a vLLM that dies, and the journal against a stand-in Hub."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from prebake_testing.net import free_port, get, request, send_json
from prebake_testing.hosts import Launcher
from prebake_testing.pods import KEY, Pod
from prebake_testing.servers import wait_held

SECRETS = {  # planted in the environment; none may reach the log file or the status page
    "HF_TOKEN": "hf_PlantedHubTokenAbcdefghijklmnop",
    "RUNPOD_API_KEY": "rpa_PLANTEDRUNPODKEY0123456789",
    "PREBAKE_REGISTRY_PASSWORD": "registry-password-planted",
    "MY_SERVICE_SECRET": "another-planted-secret",
}
PLANTED_IN_OUTPUT = ("sk-planted-0123456789abcdef", "planted-bearer-value-123", "hf_PlantedTokenNotInTheEnvironment0123")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[prebake(-bridge)?\] ")


def test_start_up_phases_as_the_status_page_shows_them(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "PHASED_LEAK": " ".join(SECRETS), **SECRETS})
    try:
        # From the bridge's first second, vLLM not up: the page answers, the API says "model loading".
        status = pod.wait_phase("starting", timeout=5)
        assert status["image"]["revision"] == "test" and status["image"]["vllm"] == "0.27.1"
        assert status["restarts"] == 0 and status["queue"] is None
        assert [d["topic"] for d in status["decisions"]][:2] == ["model", "compat"]
        # (a generation request would be held for the start: VL_START_HOLD, test_start_hold.py)
        loading = request(pod.port, "GET", "/v1/models", None, {"authorization": f"Bearer {KEY}"})
        assert loading[0] == 503 and b"/prebake/status" in loading[2]
        for step, phase in enumerate(("loading weights", "compiling", "capturing graphs"), start=1):
            pod.go(step)
            status = pod.wait_phase(phase)
        # vLLM's stdout and stderr are two pipes: which of their last lines came last is not fixed
        assert "milestone: " in status["why"] and "capturing" in status["why"].lower()
        assert status["gpus"] == [{"index": 0, "name": "NVIDIA H200", "memory_used_mib": 0,
                                   "memory_total_mib": 143771}]
        pod.go(4)
        status = pod.wait_phase("serving")
        deadline = time.monotonic() + 15  # throughput needs two /metrics samples, 5 s apart
        while (status["queue"] or {}).get("prompt_tokens_per_s") is None and time.monotonic() < deadline:
            time.sleep(0.5)
            status = pod.status()[1]
        queue = status["queue"]
        assert (queue["running"], queue["waiting"], queue["kv_cache_usage_percent"]) == (3, 2, 25.0)
        assert 500 < queue["prompt_tokens_per_s"] < 2000 and 25 < queue["generation_tokens_per_s"] < 100
        assert any("Starting to load model" in line for line in status["log"]["lines"])
        text = pod.status(path="/prebake/status.txt")[1].decode()
        assert "phase: serving" in text and "queue: running 3, waiting 2, KV cache 25.0%" in text
        assert "gpu 0 NVIDIA H200: 0 / 143771 MiB" in text
        assert len(pod.status(path="/prebake/status?lines=3")[1]["log"]["lines"]) == 3
        for odd in ("%C2%B2", "%EF%BC%93", "-1", "x"):  # ², a fullwidth 3: "digits" int() refuses or reads; the default
            code, body = pod.status(path=f"/prebake/status?lines={odd}")
            assert code == 200 and len(body["log"]["lines"]) > 3, (odd, code, body)
        # The requests still reach vLLM (the page wraps the bridge, it does not replace it).
        answer = request(pod.port, "POST", "/v1/chat/completions", {"model": "ornith", "stream": True},
                         {"authorization": f"Bearer {KEY}", "x-standin-delay": "1.2"})
        assert answer[0] == 200 and answer[2].startswith(b": keep-alive\n\n") and answer[2].endswith(b"[DONE]\n\n")
        full_json = json.dumps(pod.status()[1])
    finally:
        code, out, err = pod.stop()
    assert code == 143, err[-3000:]
    # The banner first, every launcher, supervisor and bridge line stamped; vLLM's output still in the container log.
    launcher_lines = [line for line in err.splitlines() if "[prebake" in line]
    assert re.match(r"\S+Z \[prebake\] image prebake a40, revision test, vLLM 0\.27\.1, CUDA 13\.0", err)
    assert launcher_lines and all(STAMP.match(line) for line in launcher_lines), launcher_lines
    assert any("[prebake-bridge]" in line for line in launcher_lines)
    assert "Starting to load model" in out and "Capturing CUDA graphs" in err
    # No secret anywhere: not in the status page, not in the log file, not in the container log.
    log_file = (pod.run_dir / "vllm.log").read_text()
    assert "Graph capturing finished" in log_file and "[redacted]" in log_file
    for secret in (*SECRETS.values(), KEY, *PLANTED_IN_OUTPUT):
        for where, text in (("status", full_json + text), ("log file", log_file), ("container log", out + err)):
            assert secret not in text, (secret, where)


def test_the_status_page_needs_the_pods_key(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        assert pod.status(key=None)[0] == 401
        assert pod.status(key="wrong-key-0000")[0] == 401
        code, _, body = get(pod.port, "/prebake/status.txt", {"x-api-key": KEY})
        assert code == 200 and b"phase: starting" in body
        assert request(pod.port, "POST", "/prebake/status", b"")[0] in (401, 405)
    finally:
        pod.stop()


def test_a_vllm_that_dies_and_the_pod_without_a_key(tmp_path):
    pod = Pod(tmp_path, mode="die")
    # No key on this pod: identity and phase only, never a log line.
    status = pod.wait_phase("starting", key=None, timeout=5)
    assert set(status) == {"image", "phase", "why", "phase_since", "uptime_s", "restarts", "more"}
    pod.go(1)
    code, _, err = pod.finish()
    assert code == 3 and "vLLM exited with code 3" in err
    state = json.loads((pod.run_dir / "state.json").read_text())
    assert state["vllm"]["exit"]["code"] == 3
    assert "CUDA out of memory" in (pod.run_dir / "vllm.log").read_text()
    # The next start of the pod shows how the previous one ended; its log is kept beside.
    again = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        status = again.wait_phase("starting", timeout=5)
        assert status["previous_run"]["exit"]["code"] == 3 and status["previous_run"]["log_file"] == "vllm.log.1"
        assert "CUDA out of memory" in (again.run_dir / "vllm.log.1").read_text()
    finally:
        again.stop()


def test_the_watchdog_ends_a_hung_vllm_but_never_a_slow_one(tmp_path):
    pod = Pod(tmp_path, {"VL_WATCHDOG": "2"})
    try:
        for step in range(1, 4):
            pod.go(step)
        # No key on this pod: the phase's reason quotes no log line either.
        assert "milestone" not in pod.wait_phase("capturing graphs", key=None)["why"]
        pod.go(4)
        pod.wait_phase("serving", key=None)
        # A prefill longer than the watchdog, with /health answering: served, not killed.
        slow = request(pod.port, "POST", "/v1/chat/completions", {"model": "ornith", "stream": True},
                       {"x-standin-delay": "3.5"})
        assert slow[0] == 200 and slow[2].endswith(b"[DONE]\n\n") and pod.process.poll() is None
        # Now vLLM hangs: /health stops answering while two clients wait.
        answers = {}

        def ask(name: str, body: dict) -> None:
            answers[name] = request(pod.port, "POST", "/v1/chat/completions" if name != "anthropic" else
                                    "/v1/messages", body, {"x-standin-delay": "60", "x-standin-id": name},
                                    timeout=30)

        waiting = [threading.Thread(target=ask, args=("openai", {"model": "ornith", "stream": True})),
                   threading.Thread(target=ask, args=("anthropic", {"model": "ornith", "stream": True,
                                                                   "max_tokens": 5})),
                   threading.Thread(target=ask, args=("plain", {"model": "ornith"}))]
        for thread in waiting:
            thread.start()
        wait_held(pod.internal, "openai", "anthropic", "plain")  # all three in vLLM's hands, heartbeats flowing
        (pod.control / "hang").touch()
        began = time.monotonic()
        code, _, err = pod.finish(timeout=60)
        for thread in waiting:
            thread.join(10)
    finally:
        pod.stop()
    assert code == 6, err[-3000:]
    assert time.monotonic() - began < 20  # 2 s of watchdog, the probe's own 2 s timeout, then vLLM stopped
    status, _, body = answers["openai"]
    assert status == 200 and body.startswith(b": keep-alive\n\n")
    assert re.search(rb'data: \{"error": \{"message": "vLLM stopped answering[^\n]*\n\ndata: \[DONE\]\n\n$', body)
    status, _, body = answers["anthropic"]
    assert body.startswith(b"event: ping") and b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"' in body
    status, _, body = answers["plain"]  # non-streaming: the whitespace heartbeats, then a JSON error
    assert status == 200 and body.startswith(b"\n") and json.loads(body)["error"]["type"] == "service_unavailable"
    assert "watchdog: vLLM was serving, then its health check failed" in err
    assert "the container exits 6" in err
    state = json.loads((pod.run_dir / "state.json").read_text())
    assert state["vllm"]["exit"]["code"] == 6 and "watchdog" in state["vllm"]["exit"]["why"]


class Hub(BaseHTTPRequestHandler):
    """The two calls huggingface_hub's upload_file makes: preupload (upload mode) and commit (ndjson)."""
    commits: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if "/preupload/" in self.path:
            files = json.loads(body)["files"]
            answer = {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
        elif "/commit/" in self.path:
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
            files = {item["value"]["path"]: base64.b64decode(item["value"]["content"]).decode()
                     for item in lines if item["key"] == "file"}
            Hub.commits.append({"path": self.path, "auth": self.headers.get("authorization"), "files": files})
            oid = "0123456789abcdef0123456789abcdef01234567"
            answer = {"commitUrl": f"http://{self.headers['host']}/datasets/me/pod-logs/commit/{oid}", "commitOid": oid}
        else:
            self.send_error(404)
            return
        send_json(self, 200, answer)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    Hub.commits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_journal_uploads_status_and_log_to_the_hub(tmp_path, hub):
    token = SECRETS["HF_TOKEN"]
    pod = Pod(tmp_path, {"VL_JOURNAL": "on", "VL_JOURNAL_REPO": "datasets/me/pod-logs", "HF_TOKEN": token,
                         "HF_ENDPOINT": hub, "VLLM_API_KEY": KEY})
    try:
        deadline = time.monotonic() + 20
        while not Hub.commits and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Hub.commits, pod.stop()[2][-3000:]
        first = Hub.commits[0]
        assert first["path"] == "/api/datasets/me/pod-logs/commit/main" and first["auth"] == f"Bearer {token}"
        text = first["files"]["prebake/testpod.txt"]
        assert "phase: starting" in text and "decisions:" in text and token not in text
        for step in range(1, 5):  # serving: one more upload at once, not 25 s later
            pod.go(step)
        pod.wait_phase("serving")
        deadline = time.monotonic() + 15
        while not any("phase: serving" in c["files"]["prebake/testpod.txt"] for c in Hub.commits) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        serving = [c for c in Hub.commits if "phase: serving" in c["files"]["prebake/testpod.txt"]]
        assert serving and "Graph capturing finished" in serving[0]["files"]["prebake/testpod.txt"]
        # the Hub has the commit before the journal has its answer: the page counts it once the answer is in
        deadline = time.monotonic() + 10
        while (journal := pod.status()[1]["journal"])["uploads"] < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert journal["uploads"] >= 2 and journal["last_error"] is None, journal
    finally:
        pod.stop()


def test_an_unreachable_hub_never_fails_the_pod(tmp_path):
    pod = Pod(tmp_path, {"VL_JOURNAL": "on", "VL_JOURNAL_REPO": "me/pod-logs", "HF_TOKEN": SECRETS["HF_TOKEN"],
                         "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "VLLM_API_KEY": KEY})
    try:
        for step in range(1, 5):
            pod.go(step)
        status = pod.wait_phase("serving")
        assert status["journal"]["uploads"] == 0
        assert request(pod.port, "POST", "/v1/chat/completions", {"model": "ornith"},
                       {"authorization": f"Bearer {KEY}"})[0] == 200
    finally:
        code, _, err = pod.stop()
    assert code == 143 and "Traceback" not in err


def test_the_journal_and_watchdog_decisions(tmp_path):
    launcher = Launcher(tmp_path)
    plan = launcher.plan("h200_580", env={"VL_JOURNAL": "on", "VL_JOURNAL_REPO": "me/logs", "HF_TOKEN": "hf_x" * 5,
                                          "RUNPOD_POD_ID": "abc123", "VL_CACHE_ROOT": "/workspace"})
    [journal] = plan.decision("journal")
    assert journal["decision"].startswith("https://huggingface.co/me/logs/blob/main/prebake/abc123.txt: every 25 s")
    assert plan.plan["observe"]["run_dir"] == "/workspace/prebake/abc123"
    assert plan.plan["observe"]["watchdog_s"] == 90 and "90 s" in plan.decision("watchdog")[0]["decision"]
    no_repo = launcher.plan("h200_580", env={"VL_JOURNAL": "on", "HF_TOKEN": "hf_x" * 5})
    assert no_repo.decision("journal")[0]["decision"].startswith("off: warning: VL_JOURNAL=on but VL_JOURNAL_REPO")
    no_token = launcher.plan("h200_580", env={"VL_JOURNAL": "on", "VL_JOURNAL_REPO": "me/logs"})
    assert "HF_TOKEN is unset" in no_token.decision("journal")[0]["decision"]
    assert launcher.plan("h200_580", env={"VL_WATCHDOG": "0"}).decision("watchdog")[0]["decision"].startswith("off")
    for env, needle in (({"VL_WATCHDOG": "-1"}, "VL_WATCHDOG='-1'"), ({"VL_JOURNAL_REPO": "not a repo"}, "VL_JOURNAL_REPO"),
                        ({"VL_JOURNAL": "maybe"}, "VL_JOURNAL='maybe'")):
        bad = launcher.run("h200_580", env=env)
        assert bad.rc == 2 and needle in bad.stderr
    off = launcher.plan("h200_580", env={"VL_BRIDGE": "off"})
    assert off.plan["observe"] is None and off.decision("status")[0]["decision"].startswith("off")


def test_a_huge_lines_parameter_is_clamped_not_a_500(tmp_path):
    """int() refuses more than 4,300 digits: the page clamps ?lines= to what it keeps instead (no key needed to ask)."""
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        for asked in ("9" * 5000, "0" * 5000 + "3", "1" * 20):
            code, _, body = get(pod.port, f"/prebake/status?lines={asked}", {"authorization": f"Bearer {KEY}"})
            assert code == 200, body[:300]
        code, _, body = get(pod.port, "/prebake/status?lines=" + "9" * 5000)  # without the key: refused, not a 500
        assert code == 401
    finally:
        _, _, err = pod.stop()
    assert "Traceback" not in err and "Exception in ASGI" not in err, err[-3000:]


class SurrogateRunPod(BaseHTTPRequestHandler):
    """RunPod's API v2 refusing a stop with an RFC 9457 body whose detail holds an escaped lone surrogate (valid JSON)."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        raw = b'{"title": "Internal Server Error", "status": 500, "detail": "refused \\ud800 here"}'
        self.send_response(500)
        self.send_header("content-type", "application/problem+json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


def test_text_that_is_not_utf8_never_breaks_the_page_nor_the_journal(tmp_path, hub):
    """A container argument of Latin-1 bytes reaches Python as a lone surrogate (os.fsdecode), and so does an escaped
    \\ud800 in RunPod's error body through the idle stop's last_error: the page and the journal show them escaped."""
    runpod = ThreadingHTTPServer(("127.0.0.1", 0), SurrogateRunPod)
    threading.Thread(target=runpod.serve_forever, daemon=True).start()
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_JOURNAL": "on", "VL_JOURNAL_REPO": "datasets/me/pod-logs",
                         "HF_TOKEN": SECRETS["HF_TOKEN"], "HF_ENDPOINT": hub, "VL_IDLE_STOP": "0.05",
                         "RUNPOD_API_KEY": "rpa_PODSCOPEDKEY0123456789abcdef",
                         "RUNPOD_REST_URL": f"http://127.0.0.1:{runpod.server_address[1]}/v2"},
              args=[b"--download-dir", b"/tmp/caf\xe9"])
    try:
        for step in range(1, 5):
            pod.go(step)
        status = pod.wait_phase("serving")
        assert "\\udce9" in json.dumps(status["vllm"]["argv"]), status["vllm"]["argv"]
        deadline = time.monotonic() + 30
        while not (status := pod.status()[1])["idle_stop"]["last_error"] and time.monotonic() < deadline:
            time.sleep(0.2)
        # RunPod's error parser (entrypoint/runpodapi.py) keeps the detail as text that encodes
        assert "refused" in status["idle_stop"]["last_error"] and "here" in status["idle_stop"]["last_error"], status
        code, text = pod.status(path="/prebake/status.txt")
        assert code == 200 and b"\\udce9" in text, text[:2000]
        deadline = time.monotonic() + 30
        while not any("\\udce9" in c["files"].get("prebake/testpod.txt", "") for c in Hub.commits) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any("\\udce9" in c["files"].get("prebake/testpod.txt", "") for c in Hub.commits), Hub.commits[-1:]
    finally:
        _, _, err = pod.stop()
        runpod.shutdown()
    assert "Traceback" not in err and "Exception in ASGI" not in err and "UnicodeEncodeError" not in err, err[-3000:]
