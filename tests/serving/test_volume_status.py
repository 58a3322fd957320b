"""Hostile round 6 (issue 56), through the real launcher and bridge: files planted in the pod's run folder on the
volume (a state.json of another shape, a FIFO or a bad compile-cache.json, a FIFO as vLLM's log) never stop a
start, never block the bridge's event loop, never turn the status page into a 500; the page lists them."""

from __future__ import annotations

import json
import os

from prebake_testing.net import request, wait_until
from prebake_testing.pods import KEY, Pod

AUTH = {"authorization": f"Bearer {KEY}"}


def page(pod: Pod, path: str = "/prebake/status") -> tuple[int, bytes]:
    status, _, body = request(pod.port, "GET", path, headers=AUTH, timeout=5)  # a blocked event loop: a time-out
    return status, body


def test_files_planted_in_the_run_folder_are_set_aside_and_listed(tmp_path):
    run_dir = tmp_path / "volume" / "prebake" / "testpod"  # Pod's RUNPOD_POD_ID
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_text(json.dumps({"identity": 1, "vllm": "x"}))  # a crash loop, before
    cache_status = run_dir / "compile-cache.json"
    os.mkfifo(cache_status)
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        status = pod.wait_phase("starting", timeout=10)
        assert status["previous_run"] is None and status["compile_cache"] is None
        aside = {entry["file"]: entry["why"] for entry in status["set_aside"]}
        assert 'identity is a number, not an object' in aside[str(run_dir / "state.json")], aside
        assert "a FIFO" in aside[str(cache_status)], aside
        assert request(pod.port, "GET", "/health", timeout=5)[0] == 503  # the event loop still answers
        text = page(pod, "/prebake/status.txt")[1].decode()
        assert f"set aside (read as absent): {cache_status}: it is a FIFO, not a regular file" in text
        for content, why in (({"restore": "cold", "publish": [1]}, "restore is a string, not an object"),
                             ("[" * 50_000, "nests 50000 levels deep")):
            cache_status.unlink()
            cache_status.write_text(content if isinstance(content, str) else json.dumps(content))
            for path in ("/prebake/status", "/prebake/status.txt"):
                code, body = page(pod, path)
                shown = body.decode() if path.endswith(".txt") else json.dumps(json.loads(body)["set_aside"])
                assert code == 200 and why in shown, (path, shown)
        # vLLM's log replaced by a FIFO while the bridge follows it (it reopens a rotated file)
        log = run_dir / "vllm.log"
        log.unlink()
        os.mkfifo(log)
        wait_until(lambda: any(entry["file"] == str(log) for entry in json.loads(page(pod)[1])["set_aside"]),
                   10, "vllm.log set aside")
        assert request(pod.port, "GET", "/health", timeout=5)[0] == 503
    finally:
        code, _, err = pod.stop()
    assert code == 143, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
