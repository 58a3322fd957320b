"""A heartbeat only ever goes between two events, also when the client reads slower than vLLM writes.

Found: with a 1 s heartbeat, events of ~100 KB every 10 ms and a client that pauses 1.3 s every 20
events, `: keep-alive` landed inside a `data:` line (the openai SDK then died on "Unterminated
string"): the heartbeat task checked the event boundary, then waited in the flow-controlled send
while the relay wrote more bytes. The time the relay is blocked on a slow client is not vLLM's silence.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest

from prebake_testing.servers import start_bridge

EVENTS = 300


def slow_read(port: int) -> tuple[list[bytes], float]:
    """Read a chat stream, pausing 1.3 s after every 20 events; the events, and the seconds spent."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    began = time.monotonic()
    connection.request("POST", "/v1/chat/completions", json.dumps({"model": "ornith", "stream": True}),
                       {"content-type": "application/json", "x-standin-chunks": str(EVENTS),
                        "x-standin-gap": "0.01", "x-standin-pad": "100000", "x-standin-record": "0"})
    response = connection.getresponse()
    assert response.status == 200
    buffer, events = b"", []
    while True:
        chunk = response.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            events.append(event)
            if len(events) % 20 == 0:
                time.sleep(1.3)  # the slow client under test (not a wait for an event)
    connection.close()
    return events, time.monotonic() - began


def test_heartbeats_stay_between_events_when_the_client_is_slow(standin):
    bridge = start_bridge(standin.port, heartbeat=1)
    try:
        events, _ = slow_read(bridge.port)
    finally:
        assert "Traceback" not in bridge.stop()
    broken = [event[:80] + b"..." + event[-80:] for event in events
              if not (event.startswith(b"data: ") and b"keep-alive" not in event) and event != b": keep-alive"]
    assert not broken, f"{len(broken)} events broken by a heartbeat: {broken[:3]}"
    data = [event for event in events if event.startswith(b"data: ")]
    assert len(data) == EVENTS + 2 and data[-1] == b"data: [DONE]"  # role chunk, 300 tokens, [DONE]
    for event in data[:-1]:
        json.loads(event[6:])
    # vLLM never fell silent: a client slower than vLLM is no reason for a heartbeat. Counting the time
    # held by the client as silence gave one per pause (15); 2 leaves room for a stalled machine.
    assert events.count(b": keep-alive") <= 2, events.count(b": keep-alive")
