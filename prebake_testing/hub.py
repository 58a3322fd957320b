"""A stand-in of the Hugging Face Hub that the real huggingface_hub client (2.4) downloads from and uploads to.

Download: `HEAD`/`GET /{datasets/}owner/name/resolve/{revision}/{path}`, with the headers hf_hub_download and
get_hf_file_metadata read (X-Repo-Commit, ETag, Content-Length; X-Error-Code on a 404: EntryNotFound or
RepoNotFound, which the client turns into its own exceptions). Upload: upload_file's create_commit, that is
`POST /api/{type}s/owner/name/preupload/{revision}` (this stand-in answers "regular" for every file, so the client
sends it base64 inside the commit instead of through LFS; the real Hub answers "lfs" past 10 MB, which changes
only the transport) and `POST /api/{type}s/owner/name/commit/{revision}` (NDJSON: a header, then one line per
file). Repositories exist once created (`create`); `hang` makes every request wait (a Hub that does not answer).

`python -m prebake_testing.hub --port P` runs it alone (the GPU harness does, on a machine without network).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .net import send_json

COMMIT = "0123456789abcdef0123456789abcdef01234567"
RESOLVE = re.compile(r"^/(?:(datasets|models|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
API = re.compile(r"^/api/(datasets|models|spaces)/([^/]+/[^/]+)/(preupload|commit)/([^/?]+)")


class Hub:
    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.files: dict[tuple[str, str, str], bytes] = {}  # (repo type, repo id, path) -> bytes
        self.repos: set[tuple[str, str]] = set()
        self.requests: list[dict] = []  # every request: method, path, authorization
        self.commits: list[dict] = []
        self.hang = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802
                hub.answer_file(self, head=True)

            def do_GET(self) -> None:  # noqa: N802
                hub.answer_file(self, head=False)

            def do_POST(self) -> None:  # noqa: N802
                hub.answer_api(self)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"

    def create(self, repo: str, kind: str = "dataset") -> None:
        self.repos.add((kind, repo))

    def put(self, repo: str, path: str, data: bytes, kind: str = "dataset") -> None:
        self.create(repo, kind)
        self.files[(kind, repo, path)] = data

    def get(self, repo: str, path: str, kind: str = "dataset") -> bytes | None:
        return self.files.get((kind, repo, path))

    def stop(self) -> None:
        self.hang.clear()
        self.server.shutdown()
        self.server.server_close()

    # --- the protocol ------------------------------------------------------------------------------------------
    def _record(self, handler) -> None:
        self.requests.append({"method": handler.command, "path": handler.path,
                              "authorization": handler.headers.get("authorization")})
        while self.hang.is_set():
            time.sleep(0.05)

    def answer_file(self, handler, head: bool) -> None:
        self._record(handler)
        match = RESOLVE.match(handler.path.split("?", 1)[0])
        if not match:
            return self._error(handler, 404, "RepoNotFound", f"not a resolve URL: {handler.path}", head)
        kind = {"datasets": "dataset", "spaces": "space"}.get(match[1] or "", "model")
        repo, path = match[2], match[4]
        if (kind, repo) not in self.repos:
            return self._error(handler, 404, "RepoNotFound", f"Repository {repo} not found", head)
        data = self.files.get((kind, repo, path))
        if data is None:
            return self._error(handler, 404, "EntryNotFound", f"{path} does not exist on main", head)
        etag = hashlib.sha256(data).hexdigest()
        handler.send_response(200)
        handler.send_header("content-type", "application/octet-stream")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("etag", f'"{etag}"')
        handler.send_header("x-repo-commit", COMMIT)
        handler.end_headers()
        if not head:
            handler.wfile.write(data)

    def _error(self, handler, status: int, code: str, message: str, head: bool = False) -> None:
        raw = json.dumps({"error": message}).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("x-error-code", code)
        handler.send_header("x-error-message", message)
        handler.send_header("x-repo-commit", COMMIT) if code == "EntryNotFound" else None
        handler.send_header("content-length", "0" if head else str(len(raw)))
        handler.end_headers()
        if not head:
            try:
                handler.wfile.write(raw)
            except BrokenPipeError:  # the client gave up (a restore that ran out of time)
                pass

    def answer_api(self, handler) -> None:
        self._record(handler)
        body = handler.rfile.read(int(handler.headers.get("content-length", 0)))
        match = API.match(handler.path)
        if not match:
            return self._error(handler, 404, "RepoNotFound", "unknown API path")
        kind, repo, what = match[1][:-1], match[2], match[3]
        if (kind, repo) not in self.repos:
            return self._error(handler, 404, "RepoNotFound", f"Repository {repo} not found")
        if not handler.headers.get("authorization", "").startswith("Bearer "):
            return self._error(handler, 401, "Unauthorized", "Invalid credentials in Authorization header")
        if what == "preupload":
            files = json.loads(body)["files"]
            return send_json(handler, 200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                       "shouldIgnore": False} for f in files]})
        written = {}
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            if item["key"] == "file":
                written[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
        for path, data in written.items():
            self.files[(kind, repo, path)] = data
        self.commits.append({"repo": repo, "kind": kind, "files": sorted(written),
                             "authorization": handler.headers.get("authorization")})
        send_json(handler, 200, {"commitUrl": f"{self.url}/{repo}/commit/{COMMIT}", "commitOid": COMMIT})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--repo", action="append", default=[], help="a dataset repository that exists (owner/name)")
    args = parser.parse_args()
    hub = Hub(args.port)
    for repo in args.repo:
        hub.create(repo)
    print(hub.url, flush=True)
    hub.thread.join()


if __name__ == "__main__":
    main()
