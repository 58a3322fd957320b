"""What the bridge does for speed at the engine's peak (benchmarks/bridge_peak_bench.py measures it) keeps its
behaviour: it runs on uvloop where the venv has it and on asyncio's loop where not, and its one heartbeat timer
per stream still beats in every silence, between vLLM's events only."""

from __future__ import annotations

import itertools
import json
import sys

import pytest

from prebake_testing.net import free_port, request, wait_healthy
from prebake_testing.servers import BRIDGE, HEARTBEAT_S, Server

CHAT = {"model": "ornith", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def hidden_uvloop(folder) -> str:
    """A PYTHONPATH entry where `import uvloop` fails, as in a venv without it."""
    (folder / "uvloop.py").write_text("raise ImportError('no uvloop in this venv')\n")
    return str(folder)


@pytest.mark.parametrize("venv", ["with uvloop", "without uvloop"])
def test_the_bridge_runs_on_uvloop_where_the_venv_has_it_and_on_asyncio_where_not(standin, tmp_path, venv):
    pytest.importorskip("uvloop")  # the test venv pins it, as the image's does
    env = {"VLLM_API_KEY": ""}
    if venv == "without uvloop":
        env["PYTHONPATH"] = hidden_uvloop(tmp_path)
    port = free_port()
    bridge = Server([sys.executable, str(BRIDGE), "--host", "127.0.0.1", "--port", str(port), "--upstream",
                     f"http://127.0.0.1:{standin.port}", "--heartbeat", str(HEARTBEAT_S)], port, "the bridge", env=env)
    try:
        wait_healthy(port, bridge.process)  # the bridge has seen vLLM's /health: before that a request gets 503
        status, _, raw = request(port, "POST", "/v1/chat/completions", CHAT, {"x-standin-delay": str(HEARTBEAT_S * 3)})
    finally:
        err = bridge.stop()
    loop = "uvloop" if venv == "with uvloop" else "asyncio"
    assert f"event loop: {loop}" in err, err
    assert status == 200 and raw.count(b": keep-alive\n\n") >= 2 and raw.endswith(b"data: [DONE]\n\n"), raw


def test_silences_between_events_each_get_heartbeats_at_event_boundaries(standin, bridge):
    """vLLM silent for three intervals between each of its events: beats in every gap, never inside an event,
    and the events byte for byte once the beats are taken out (the stand-in's own record)."""
    status, _, raw = request(bridge.port, "POST", "/v1/chat/completions", CHAT,
                             {"x-standin-id": "gaps", "x-standin-chunks": "3", "x-standin-gap": str(HEARTBEAT_S * 3)})
    assert status == 200
    events = raw.split(b"\n\n")[:-1]
    beat_runs = [len(list(run)) for beat, run in itertools.groupby(e == b": keep-alive" for e in events)
                 if beat]
    data = [e for e in events if e != b": keep-alive"]
    assert all(e.startswith(b"data: ") for e in data)
    sent = standin.event("gaps")["body"].encode()
    assert b"".join(e + b"\n\n" for e in data) == sent
    # 3 tokens + the role chunk + [DONE]: a gap after each of the first four writes, each with its beats
    assert len(beat_runs) >= 4 and all(run >= 2 for run in beat_runs), beat_runs
    assert json.loads(data[1][6:])["choices"][0]["delta"]["content"] == "tok0 "
