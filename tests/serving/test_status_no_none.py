"""The status page never prints a Python None, at any phase of a start (a figure not known yet is said so): through
the real launcher with the phased stand-in vLLM, the text and the JSON page at each phase, and in the first seconds
of serving, when vLLM's throughput needs a second /metrics reading (the page once read `prompt None tokens/s ... (over
None s)`). The swapping phase: tests/swap/test_swap_status.py."""

from __future__ import annotations

import time

from prebake_testing.net import request
from prebake_testing.pods import KEY, Pod


def raw(pod: Pod, path: str, key: str | None = KEY) -> str:
    """The page as sent (JSON's null is no None; a "None" in a string would be)."""
    code, _, body = request(pod.port, "GET", path, None, {"authorization": f"Bearer {key}"} if key else {})
    assert code == 200, (path, code, body)
    return body.decode()


def pages(pod: Pod) -> tuple[dict, str, str]:
    return pod.status()[1], raw(pod, "/prebake/status.txt"), raw(pod, "/prebake/status")


def assert_no_none(pod: Pod, phase: str) -> str:
    status, text, raw = pages(pod)
    assert "None" not in text and "None" not in raw, (phase, text, raw)
    return text


def test_no_none_at_any_phase_of_a_start(tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        for step, phase in enumerate(("starting", "loading weights", "compiling", "capturing graphs"), start=0):
            if step:
                pod.go(step)
            pod.wait_phase(phase)
            assert f"phase: {phase} since" in assert_no_none(pod, phase)
        pod.go(4)
        pod.wait_phase("serving")
        # the first /metrics reading: a queue, but no throughput yet (it needs two readings, 5 s apart)
        deadline, first = time.monotonic() + 10, None
        while first is None and time.monotonic() < deadline:
            status, text, raw = pages(pod)
            if status["queue"] is not None and status["queue"]["over_s"] is None:
                first = text
                assert "None" not in text and "None" not in raw, text
            time.sleep(0.1)
        assert first is not None and "throughput not measured yet" in first, first
        deadline = time.monotonic() + 15
        while (pod.status()[1]["queue"] or {}).get("over_s") is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "tokens/s (over " in assert_no_none(pod, "serving")
    finally:
        pod.stop()


def test_no_none_on_a_page_without_a_key_nor_after_a_failed_run(tmp_path):
    """A pod without a key (identity and phase only), and the next start's page after vLLM died (the previous
    run's end), text and JSON."""
    pod = Pod(tmp_path, mode="die")
    pod.wait_phase("starting", key=None, timeout=5)
    text, page = raw(pod, "/prebake/status.txt", None), raw(pod, "/prebake/status", None)
    assert "None" not in text and "None" not in page, (text, page)
    pod.go(1)
    pod.finish()
    again = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        again.wait_phase("starting", timeout=5)
        assert "previous run: started" in assert_no_none(again, "starting after a failed run")
    finally:
        again.stop()
