"""A stand-in of RunPod's REST API v2 that answers only what v2 answers, and checks every request against RunPod's
own published schema (shared/runpod/openapi-v2.json, runpod/docs' api-reference-v2/openapi.json) with jsonschema.

What it serves, at `http://127.0.0.1:<port>/v2` (the base to give as RUNPOD_REST_URL):
  POST  /v2/pods/{id}/action   PodActionRequest; each call takes the next scripted answer (`RunPodApi.script`, the
                               last one repeats): 2xx answers the Pod, 3xx redirects to `RunPodApi.redirect_to`,
                               429 carries Retry-After, anything else is a problem
  GET   /v2/templates          {"templates": [...]}, the account's templates (`RunPodApi.templates`, by id)
  POST  /v2/templates          CreateTemplateRequest -> 201 Template
  PATCH /v2/templates/{id}     UpdateTemplateRequest -> 200 Template (the fields sent change); 404 for another id
A path the schema does not have (every v1 path) is a 404, a method its path does not have a 405, a request
without the key (`RunPodApi.key`) a 401, a body that breaks the request schema a 422 whose `errors` name each
field (`$.disk: '200' is not of type 'integer'`), as v2 does: every error is an RFC 9457 problem. Template writes
first take `RunPodApi.template_answers` while any are left, each a problem's fields (`status`, `detail`, optional
`errors` and `headers`, such as Retry-After): a refused write changes nothing.
Every answer is itself checked against the schema's response for its status. `RunPodApi.calls` records each
request (method, path, auth, body, at).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "shared" / "runpod" / "openapi-v2.json"
SCHEMA_URI = "urn:runpod:openapi-v2"
POD_KEY = "rpa_PODSCOPEDKEY0123456789abcdef"  # RunPod's pod-scoped key: never in a log line or on the page
TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
          409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
          502: "Bad Gateway", 503: "Service Unavailable"}
Answer = int | tuple[int, dict[str, str]]


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@lru_cache(maxsize=None)
def _validator(pointer: str):
    from jsonschema import Draft202012Validator  # OpenAPI 3.1's schemas are JSON Schema 2020-12
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    registry = Registry().with_resource(SCHEMA_URI, Resource(contents=schema(), specification=DRAFT202012))
    return Draft202012Validator({"$ref": f"{SCHEMA_URI}#{pointer}"}, registry=registry)


def violations(value: Any, pointer: str) -> list[str]:
    """What the schema at `pointer` (a JSON pointer into the OpenAPI document, like
    /components/schemas/CreateTemplateRequest) finds wrong with `value`, one line per error naming its place."""
    errors = sorted(_validator(pointer).iter_errors(value),
                    key=lambda e: (e.validator == "unevaluatedProperties", list(map(str, e.absolute_path))))
    return [f"{error.json_path}: {error.message}" for error in errors]


def operation(method: str, path: str) -> tuple[str | None, dict | None]:
    """The schema's path template that `path` matches, and its operation for `method` (None when it has none)."""
    for template, item in schema()["paths"].items():
        if re.fullmatch(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)), path):
            return template, item.get(method.lower())
    return None, None


def _pointer(ref_holder: dict) -> str:
    return ref_holder["$ref"].removeprefix("#")


def _response_pointer(op: dict, status: int) -> str | None:
    """The schema of `op`'s answer with `status` (a $ref'd response followed), None for an answer without a body."""
    response = op["responses"].get(str(status)) or op["responses"]["default"]
    if "$ref" in response:
        response = schema()["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    content = response.get("content")
    if not content:
        return None
    return _pointer(next(iter(content.values()))["schema"])


def example_pod(pod_id: str, status: str = "RUNNING") -> dict[str, Any]:
    """The schema's own example of a Pod (the answer of podAction), for this id."""
    action = schema()["paths"]["/v2/pods/{id}/action"]["post"]
    pod = copy.deepcopy(action["responses"]["200"]["content"]["application/json"]["examples"]["pod"]["value"])
    return {**pod, "id": pod_id, "status": status}


class RunPodApi(BaseHTTPRequestHandler):
    """RunPod's REST API v2 (the module's docstring says what it answers); the class holds one server's state."""
    script: list[Answer] = [200]
    redirect_to = "http://127.0.0.1:9/v2/elsewhere"
    key: str | None = POD_KEY
    calls: list[dict] = []
    templates: dict[str, dict] = {}
    template_answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def _handle(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        path = self.path.partition("?")[0]
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = ValueError
        self.call: dict | None = {"method": self.command, "path": self.path, "at": time.monotonic(),
                                  "auth": self.headers.get("authorization"), "body": None if body is ValueError else body}
        with RunPodApi.lock:
            try:
                self._route(path, body)
            finally:
                self._record()

    def _record(self) -> None:
        """Once the answer is decided, before it is sent: a test that sees the call sees its outcome too, and a
        client that has the answer finds its call recorded."""
        if self.call is not None:
            RunPodApi.calls.append(self.call)
            self.call = None

    def _route(self, path: str, body: Any) -> None:
        template, op = operation(self.command, path)
        if template is None:
            return self._problem(404, f"no route {self.command} {path}")
        if op is None:
            allowed = ", ".join(m.upper() for m in schema()["paths"][template] if m != "parameters")
            return self._problem(405, "The requested method is not allowed for this path.", op, Allow=allowed)
        if RunPodApi.key is not None and self.headers.get("authorization") != f"Bearer {RunPodApi.key}":
            return self._problem(401, "missing bearer token" if not self.headers.get("authorization")
                                 else "invalid bearer token", op)
        if "requestBody" in op:
            if self.headers.get("content-type", "").partition(";")[0].strip() != "application/json":
                return self._problem(400, "request body must be application/json", op)
            if body is ValueError or body is None:
                return self._problem(400, "request body is not JSON", op)
            errors = violations(body, _pointer(op["requestBody"]["content"]["application/json"]["schema"]))
            if errors:
                return self._problem(422, "Request validation failed.", op, errors=errors)
        self._serve(op, path, body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

    def _serve(self, op: dict, path: str, body: Any) -> None:
        name, ident = op["operationId"], path.rstrip("/").rsplit("/", 2)
        if name == "podAction":
            pod_id = ident[-2]
            answer = RunPodApi.script[min(self._count("podAction"), len(RunPodApi.script) - 1)]
            status, headers = answer if isinstance(answer, tuple) else (answer, {})
            if 300 <= status < 400:
                return self._send(status, b"", {"Location": RunPodApi.redirect_to, **headers})
            if status >= 400:
                return self._problem(status, {401: "invalid bearer token", 409: "action not valid for the pod's status"}
                                     .get(status, "upstream failure"), op, **headers)
            return self._json(op, status, example_pod(pod_id, "EXITED" if body["action"] == "stop" else "RUNNING"))
        if name == "listTemplates":
            return self._json(op, 200, {"templates": list(RunPodApi.templates.values())})
        if name not in ("createTemplate", "updateTemplate"):
            return self._problem(501, f"the stand-in does not serve {name}", op)
        if RunPodApi.template_answers:
            refusal = RunPodApi.template_answers.pop(0)
            return self._problem(refusal["status"], refusal.get("detail", "refused"), op, refusal.get("errors"),
                                 **refusal.get("headers", {}))
        if name == "createTemplate":
            template_id = f"tpl{len(RunPodApi.templates) + 1:05d}"
            RunPodApi.templates[template_id] = _template(template_id, body)
            return self._json(op, 201, RunPodApi.templates[template_id])
        template_id = ident[-1]
        if template_id not in RunPodApi.templates:
            return self._problem(404, "template not found", op)
        RunPodApi.templates[template_id] = {**RunPodApi.templates[template_id], **body}
        return self._json(op, 200, RunPodApi.templates[template_id])

    def _count(self, operation_id: str) -> int:
        return sum(1 for call in RunPodApi.calls
                   if (operation(call["method"], call["path"].partition("?")[0])[1] or {}).get("operationId")
                   == operation_id)

    def _json(self, op: dict, status: int, data: Any, content_type: str = "application/json", **headers: str) -> None:
        pointer = _response_pointer(op, status) if op else None
        problems = violations(data, pointer) if pointer else []
        if problems:  # the stand-in's own mistake: a test must see it, never a client
            raise AssertionError(f"the stand-in's answer {status} breaks RunPod's schema: {problems}")
        self._send(status, json.dumps(data).encode(), {"Content-Type": content_type, **headers})

    def _problem(self, status: int, detail: str, op: dict | None = None, errors: list[str] | None = None,
                 **headers: str) -> None:
        problem: dict[str, Any] = {"title": TITLES.get(status, "Error"), "status": status, "detail": detail}
        if errors:
            problem["errors"] = errors
        if status == 429:
            headers.setdefault("Retry-After", "1")
        self._json(op or {}, status, problem, "application/problem+json", **headers)

    def _send(self, status: int, raw: bytes, headers: dict[str, str]) -> None:
        self._record()
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(raw))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


def _template(template_id: str, body: dict) -> dict[str, Any]:
    """A Template as v2 answers one: every field present, RunPod's defaults where the body left one out."""
    return {"id": template_id, "args": "", "disk": 20, "mounts": {}, "ports": [], "env": {}, "registry": None,
            "serverless": False, "public": False, "category": "NVIDIA", "startSsh": True, "startJupyter": True,
            "allowedCudaVersions": [], **body}


def serve_runpod_api() -> tuple[ThreadingHTTPServer, str]:
    """The stand-in on a free port, its state reset (script [200], no template, the key POD_KEY); the server
    (shutdown() stops it) and the v2 base URL to give as RUNPOD_REST_URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), RunPodApi)
    server.daemon_threads = True
    RunPodApi.calls, RunPodApi.script, RunPodApi.templates, RunPodApi.template_answers = [], [200], {}, []
    RunPodApi.key, RunPodApi.redirect_to = POD_KEY, f"http://127.0.0.1:{server.server_address[1]}/v2/elsewhere"
    for pointer in ("/components/schemas/PodActionRequest", "/components/schemas/Pod",
                    "/components/schemas/ErrorResponse"):
        _validator(pointer)  # built before the first request: its time is not the first answer's
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v2"
