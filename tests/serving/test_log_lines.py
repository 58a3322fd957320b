"""What a client sends never shapes the bridge's log: control characters from a request (a path decoded from
%0D%0A) are shown escaped, so a client cannot write a line of its choosing (a fake watchdog line) there."""

from __future__ import annotations

import http.server
import socket
import threading

from prebake_testing.net import free_port
from prebake_testing.servers import start_bridge

FORGED = "2026-01-01T00:00:00Z [prebake] watchdog: forged by a client"


class Holding(http.server.ThreadingHTTPServer):
    """An upstream whose /health answers and which holds every other request until released."""

    daemon_threads = True

    def __init__(self) -> None:
        self.received, self.release = threading.Event(), threading.Event()
        holder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200 if self.path == "/health" else 404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                holder.received.set()
                holder.release.wait(10)

        super().__init__(("127.0.0.1", free_port()), Handler)


def test_a_request_path_cannot_write_a_line_of_its_own_into_the_log():
    upstream = Holding()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    bridge = start_bridge(upstream.server_address[1])
    try:
        path = "/v1/chat/completions%0D%0A" + FORGED.replace(" ", "%20")
        body = b'{"model": "ornith", "stream": false}'
        with socket.create_connection(("127.0.0.1", bridge.port), timeout=10) as client:
            client.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                           f"content-length: {len(body)}\r\n\r\n".encode() + body)
            assert upstream.received.wait(10)  # relayed: the client leaves while vLLM works on it
    finally:
        log = bridge.stop()
        upstream.release.set()
        upstream.shutdown()
    left = [line for line in log.splitlines() if "client left POST" in line]
    assert left and "completions\\x0d\\x0a2026-01-01T00:00:00Z" in left[0], log
    assert not any(line.startswith(FORGED[:20]) for line in log.splitlines()), log
