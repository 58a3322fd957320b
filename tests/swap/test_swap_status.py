"""The status page of a pod that swaps models: "swapping" while the other model starts, then serving again,
the swap counted among vLLM's restarts, and the watchdog held off meanwhile."""

from __future__ import annotations

import threading
import time

from prebake_testing.net import get, request


def test_a_swap_shows_on_the_status_page(pods, tmp_path):
    # qwen takes 3 s to start: longer than the watchdog, which must wait for the swap.
    pod = pods({"qwen": {"start_s": 3}}, env={"VL_CACHE_ROOT": str(tmp_path / "volume"), "VL_WATCHDOG": "1",
                                            "VLLM_API_KEY": "swap-pod-key-123"})
    key = {"authorization": "Bearer swap-pod-key-123"}
    assert get(pod.port, "/prebake/status", key)[2]["phase"] == "serving"
    answer = {}
    asking = threading.Thread(target=lambda: answer.update(zip(("status", "head", "body"), request(
        pod.port, "POST", "/v1/chat/completions", {"model": "qwen", "stream": True}, key, timeout=60))))
    asking.start()
    seen, deadline = [], time.monotonic() + 30
    while asking.is_alive() and time.monotonic() < deadline:
        status = get(pod.port, "/prebake/status", key)[2]
        if not seen or seen[-1] != status["phase"]:
            seen.append(status["phase"])
            for path in ("/prebake/status.txt", "/prebake/status"):  # no Python None at any phase (as sent)
                page = request(pod.port, "GET", path, None, key)[2].decode()
                assert "None" not in page, (status["phase"], page)
        time.sleep(0.1)
    asking.join(5)
    assert answer["status"] == 200 and answer["body"].endswith(b"data: [DONE]\n\n")
    assert "swapping" in seen and "failed" not in seen, seen
    deadline = time.monotonic() + 10
    while (status := get(pod.port, "/prebake/status", key)[2])["phase"] != "serving" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status["phase"] == "serving" and status["restarts"] == 1, status
    assert pod.process.poll() is None  # the watchdog (1 s) did not fire during the 3 s start


def test_secrets_of_container_arguments_and_of_hf_endpoint_are_shown_nowhere(pods, tmp_path, hub):
    # --hf-token's value has no token shape: only its option says it is a secret. HF_ENDPOINT carries a
    # password in its URL, and the journal's uploads to it fail (the Hub has no such repository), which logs its
    # address. (Where nothing listens, huggingface_hub retries a refused connection 5 times, 1 to 8 s apart: the
    # failure, and so its line, comes 23 s later.)
    value, password = "ContainerArgTok000", "pa55word-in-url"
    pod = pods({"qwen": {}}, env={"VL_CACHE_ROOT": str(tmp_path / "volume"), "VLLM_API_KEY": "swap-pod-key-123",
                                  "VL_JOURNAL": "on", "VL_JOURNAL_REPO": "owner/journal", "HF_TOKEN": "hf_" + "x" * 30,
                                  "HF_ENDPOINT": hub.url.replace("http://", f"http://user:{password}@")},
               args=["--hf-token", value])
    key = {"authorization": "Bearer swap-pod-key-123"}
    status, _, raw = request(pod.port, "POST", "/v1/chat/completions", {"model": "qwen", "stream": False}, key,
                             timeout=60)
    assert status == 200
    deadline = time.monotonic() + 30
    while "journal: upload" not in pod.stderr() and time.monotonic() < deadline:
        time.sleep(0.2)
    # The page's command is the vLLM that runs now, qwen's, once the launcher has written the swap to state.json.
    shown_at, page = time.monotonic() + 10, ""
    while "--served-model-name qwen" not in page and time.monotonic() < shown_at:
        page = get(pod.port, "/prebake/status.txt", key)[2].decode()
        time.sleep(0.1)
    state = next((tmp_path / "volume" / "prebake").glob("*/state.json")).read_text()
    log = pod.stderr()
    for shown in (page, state, log):
        assert value not in shown and password not in shown, shown
    assert "journal: upload to http://[redacted]@127.0.0.1" in log
    assert any(r["path"].startswith("/api/models/owner/journal/preupload/") for r in hub.requests)  # it was asked
    for line in ("swap: qwen starts on demand: ", "swap: start ", "start "):
        assert any(entry.split("] ", 1)[1].startswith(line) and "--hf-token [redacted]" in entry
                   for entry in log.splitlines() if "] " in entry), line
    vllm_line = next(line for line in page.splitlines() if line.startswith("vllm: "))
    assert "--served-model-name qwen" in vllm_line and "--hf-token [redacted]" in vllm_line
