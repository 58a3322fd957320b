"""bridge: the image's keep-alive bridge starts with the image's Python and relays a slow stream.

A stand-in upstream (stdlib, in this process) stays silent, then streams; the bridge must answer
with heartbeats while it is silent and then pass its bytes unchanged. Loopback only: the self-test
container has no network.
"""

import http.client
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from ..common import VARIANT

NAME = "bridge"
LEVEL = VARIANT  # bridge.py is in the variant's layers; what it imports is in the stack

SILENCE_S = 1.0
HEARTBEAT_S = 0.25
BODY = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n'
HEARTBEAT = b": keep-alive\n\n"


class Upstream(http.server.BaseHTTPRequestHandler):
    """vLLM as the bridge sees it: /health, and a stream whose first byte comes late."""

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(SILENCE_S)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("connection", "close")  # the body ends when the connection does
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(port, method, path, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers={"content-type": "application/json"})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def check(spec):
    path = spec["bridge"]
    if not os.path.exists(path):
        return False, f"{path} is missing: the entrypoint's layer has no keep-alive bridge"
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = free_port()
    bridge = subprocess.Popen([sys.executable, path, "--host", "127.0.0.1", "--port", str(port), "--upstream",
                               f"http://127.0.0.1:{upstream.server_address[1]}", "--heartbeat", str(HEARTBEAT_S)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if bridge.poll() is not None:
                return False, f"{path} exited with {bridge.returncode}: {bridge.stderr.read().decode()[-600:]}"
            try:
                if ask(port, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                return False, f"{path} did not relay GET /health within 30 s"
            time.sleep(0.1)
        began = time.monotonic()
        status, raw = ask(port, "POST", "/v1/chat/completions", b'{"model":"m","stream":true}')
        seconds = time.monotonic() - began
    finally:
        bridge.send_signal(signal.SIGTERM)
        try:
            bridge.wait(timeout=10)
        except subprocess.TimeoutExpired:
            bridge.kill()
        upstream.shutdown()
    beats = 0
    while raw.startswith(HEARTBEAT):
        raw, beats = raw[len(HEARTBEAT):], beats + 1
    if status != 200 or raw != BODY:
        return False, f"the bridge answered {status} with {raw[:200]!r}, not the upstream's stream unchanged"
    if beats < 2:
        return False, f"{beats} heartbeat(s) in {SILENCE_S:g} s of upstream silence: expected one per {HEARTBEAT_S:g} s"
    return True, f"{path} relayed a stream after {SILENCE_S:g} s of silence with {beats} heartbeats ({seconds:.1f} s)"
