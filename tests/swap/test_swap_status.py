"""The status page of a pod that swaps models: "swapping" while the other model starts, then serving again,
the swap counted among vLLM's restarts, and the watchdog held off meanwhile."""

from __future__ import annotations

import threading
import time

from tests.bridge.conftest import get, request


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
        time.sleep(0.1)
    asking.join(5)
    assert answer["status"] == 200 and answer["body"].endswith(b"data: [DONE]\n\n")
    assert "swapping" in seen and "failed" not in seen, seen
    deadline = time.monotonic() + 10
    while (status := get(pod.port, "/prebake/status", key)[2])["phase"] != "serving" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status["phase"] == "serving" and status["restarts"] == 1, status
    assert pod.process.poll() is None  # the watchdog (1 s) did not fire during the 3 s start
