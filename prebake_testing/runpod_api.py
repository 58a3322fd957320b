"""A stand-in of RunPod's REST API as far as a pod stop goes (`POST {RUNPOD_REST_URL}/pods/{id}/stop`).

Each POST takes the next scripted status (the last one repeats): 200 accepts, 401 and 500 refuse; a URL where
nothing listens is "not there". `RunPodApi.calls` records each call (path, authorization, time).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .net import send_json

POD_KEY = "rpa_PODSCOPEDKEY0123456789abcdef"  # RunPod's pod-scoped key: never in a log line or on the page


class RunPodApi(BaseHTTPRequestHandler):
    """RunPod's REST API as far as a pod stop goes: each POST takes the next scripted answer (the last one repeats)."""
    script: list[int] = [200]
    calls: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status = RunPodApi.script[min(len(RunPodApi.calls), len(RunPodApi.script) - 1)]
        RunPodApi.calls.append({"path": self.path, "auth": self.headers.get("authorization"), "at": time.monotonic()})
        message = {200: "Pod successfully stopped.", 401: "Unauthorized.", 500: "Internal error."}.get(status, "?")
        send_json(self, status, {"message": message})

    def log_message(self, *args) -> None:
        pass


def serve_runpod_api() -> tuple[ThreadingHTTPServer, str]:
    """The stand-in on a free port, calls and script reset (to [200]); the server (shutdown() stops it) and the
    REST base URL to give as RUNPOD_REST_URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), RunPodApi)
    RunPodApi.calls, RunPodApi.script = [], [200]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
