"""RunPod's HTTP proxy in front of a pod whose container does not listen yet (the image is still pulled, the
container starts or restarts): every request gets 502 and an HTML page, no JSON. A thread in the test's process
on a free port, for the paste block's pod check and the texts Claude Code prints for it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = (b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>"
        b"<p>The pod is not ready yet.</p></body></html>")


class _NotListening(BaseHTTPRequestHandler):
    def answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(502)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    do_GET = do_POST = do_HEAD = answer

    def log_message(self, *args) -> None:
        pass


class PullingPod:
    """`with PullingPod() as url:` a base URL that answers 502 as RunPod's proxy does while the pod is pulled."""

    def __enter__(self) -> str:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _NotListening)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
