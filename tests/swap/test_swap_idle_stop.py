"""Idle stop while a pod swaps models: the swap keeps the pod up even after the client that asked for it left,
and the idle clock starts again once the new model serves."""

from __future__ import annotations

import socket
import time

from prebake_testing.net import get
from prebake_testing.pods import IDLE_MIN, IDLE_S
from prebake_testing.runpod_api import POD_KEY, RunPodApi


def test_a_swap_keeps_the_pod_awake_until_the_new_model_serves(pods, tmp_path, runpod):
    pod = pods({"qwen": {"start_s": IDLE_S + 2}}, env={
        "VL_CACHE_ROOT": str(tmp_path / "volume"), "VL_IDLE_STOP": IDLE_MIN, "RUNPOD_POD_ID": "swappod",
        "RUNPOD_API_KEY": POD_KEY, "RUNPOD_REST_URL": runpod})
    # A client asks for qwen, then leaves at once: the swap goes on without it.
    with socket.create_connection(("127.0.0.1", pod.port)) as client:
        body = b'{"model": "qwen", "stream": true}'
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.monotonic() + 10
        while get(pod.port, "/prebake/status")[2]["idle_stop"]["awake"] != "swapping to qwen":
            assert time.monotonic() < deadline, pod.stderr()
            time.sleep(0.05)
    began = time.monotonic()
    seen = set()
    while (page := get(pod.port, "/prebake/status")[2])["phase"] != "serving" or page["idle_stop"]["awake"]:
        seen.add(page["idle_stop"]["awake"])
        assert time.monotonic() - began < 30, pod.stderr()
        time.sleep(0.05)
    served = time.monotonic()
    assert served - began >= IDLE_S and not RunPodApi.calls, seen  # longer than the idle time, no stop asked
    assert "swapping to qwen" in seen
    deadline = time.monotonic() + 15
    while not RunPodApi.calls:
        assert time.monotonic() < deadline, pod.stderr()
        time.sleep(0.05)
    assert RunPodApi.calls[0]["path"] == "/v2/pods/swappod/action"
    assert RunPodApi.calls[0]["at"] - served >= IDLE_S - 0.5  # the clock started again when qwen served
