"""A stand-in of RunPod's REST API v2 that answers only what v2 answers, and checks every request against RunPod's
own published schema with jsonschema when that schema is at hand (`schema_path()`, below).

What it serves, at `http://127.0.0.1:<port>/v2` (the base to give as RUNPOD_REST_URL), its routes in ROUTES:
  POST  /v2/pods/{id}/action   PodActionRequest; each call takes the next scripted answer (`RunPodApi.script`, the
                               last one repeats): 2xx answers the Pod, 3xx redirects to `RunPodApi.redirect_to`,
                               429 carries Retry-After, anything else is a problem
  GET   /v2/templates          {"templates": [...]}, the account's templates (`RunPodApi.templates`, by id)
  POST  /v2/templates          CreateTemplateRequest -> 201 Template
  PATCH /v2/templates/{id}     UpdateTemplateRequest -> 200 Template (the fields sent change); 404 for another id
A path it does not know (every v1 path) is a 404, a method its path does not have a 405, a request without the key
(`RunPodApi.key`) a 401, a request body that is not JSON a 400: every error is an RFC 9457 problem. Template writes
first take `RunPodApi.template_answers` while any are left, each a problem's fields (`status`, `detail`, optional
`errors` and `headers`, such as Retry-After): a refused write changes nothing. `RunPodApi.calls` records each
request (method, path, auth, body, at).

With RunPod's schema, the paths and methods are the schema's (one it has but the stand-in does not serve is a 501),
a body that breaks the request schema is a 422 whose `errors` name each field (`$.disk: '200' is not of type
'integer'`), as v2 does, every answer is itself checked against the schema's response for its status, and a Pod is
the schema's own example. Without it, the stand-in answers from ROUTES alone, a minimal Pod, and validates nothing.

Where the tests find RunPod's schema: the file named by $PREBAKE_RUNPOD_OPENAPI, else
`../shared/runpod/openapi-v2.json` beside the checkout (the steering repository's shared/ folder; CI gets a copy of
it beside its clone). The schema is never committed here. To put it there, copy `api-reference-v2/openapi.json` of
github.com/runpod/docs at commit SCHEMA_COMMIT to either place; its sha256 must be SCHEMA_SHA256. The tests that need
it are marked `needs_runpod_schema` (tests/conftest.py) and skipped, saying where to put it, when it is absent.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prebake_testing import REPO

# Where RunPod's schema comes from: RunPod's own docs repository, the copy the tests were written against.
SCHEMA_REPOSITORY = "github.com/runpod/docs"
SCHEMA_FILE = "api-reference-v2/openapi.json"
SCHEMA_COMMIT = "a900806e253c4f8c16da27d1a4370e72456da4cb"  # the snapshot (2026-08-20)
SCHEMA_FILE_COMMIT = "098c7fb0c6c374b1d053f896757a2282bf18e796"  # the last commit touching the file (2026-08-18)
SCHEMA_SHA256 = "b8bce61c5a2290d28a7cb2ed53173637166817249986cb18b101b2fd651fd313"
SCHEMA_VERSION = "2.0.0"  # its info.version; server https://api.runpod.io, paths under /v2
SCHEMA_VARIABLE = "PREBAKE_RUNPOD_OPENAPI"
SHARED_SCHEMA = REPO.parent / "shared" / "runpod" / "openapi-v2.json"
SCHEMA_URI = "urn:runpod:openapi-v2"
POD_KEY = "rpa_PODSCOPEDKEY0123456789abcdef"  # RunPod's pod-scoped key: never in a log line or on the page
TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
          409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
          501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable"}
Answer = int | tuple[int, dict[str, str]]


class SchemaError(RuntimeError):
    """RunPod's schema is named but missing, or is not the pinned file."""


@dataclass(frozen=True)
class Route:
    """One operation of v2: its path template, method (lower case), operationId and request body's schema."""

    template: str
    method: str
    operation_id: str
    body: str | None = None  # the components/schemas entry its request body must match; None: no body


# What the stand-in serves. With the schema at hand, `schema()` checks that it has each of these as written here.
ROUTES = (
    Route("/v2/pods/{id}/action", "post", "podAction", "PodActionRequest"),
    Route("/v2/templates", "get", "listTemplates"),
    Route("/v2/templates", "post", "createTemplate", "CreateTemplateRequest"),
    Route("/v2/templates/{id}", "patch", "updateTemplate", "UpdateTemplateRequest"),
)


def schema_path() -> Path:
    """Where RunPod's schema is looked for: $PREBAKE_RUNPOD_OPENAPI when set, else ../shared/runpod/openapi-v2.json
    beside the checkout."""
    named = os.environ.get(SCHEMA_VARIABLE)
    return Path(named).expanduser() if named else SHARED_SCHEMA


def where_to_put_it() -> str:
    return (f"copy {SCHEMA_FILE} of {SCHEMA_REPOSITORY} at commit {SCHEMA_COMMIT} to {SHARED_SCHEMA} or set "
            f"{SCHEMA_VARIABLE} to its path")


def schema_available() -> bool:
    """Whether RunPod's schema is at hand (then it is checked: a wrong file raises SchemaError, never a skip)."""
    path = schema_path()
    if not path.is_file():
        if os.environ.get(SCHEMA_VARIABLE):
            raise SchemaError(f"${SCHEMA_VARIABLE} is {str(path)!r}, which is not a file: {where_to_put_it()}")
        return False
    schema()
    return True


def load_schema(path: Path) -> dict[str, Any]:
    """The schema at `path`, once its bytes are the pinned ones and it has every route of ROUTES."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SCHEMA_SHA256:
        raise SchemaError(f"{path}: sha256 {digest}, not {SCHEMA_SHA256}: it is not the {SCHEMA_FILE} of "
                          f"{SCHEMA_REPOSITORY} at commit {SCHEMA_COMMIT} that the tests are written against; put "
                          f"that file there, or set {SCHEMA_VARIABLE} to a copy of it")
    document = json.loads(raw)
    for route in ROUTES:
        if _schema_route(document, route.template, route.method) != route:
            raise SchemaError(f"{path}: {route.method.upper()} {route.template} is not {route} there")
    return document


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    path = schema_path()
    if not path.is_file():
        raise SchemaError(f"RunPod's schema is not at {path}: {where_to_put_it()}")
    return load_schema(path)


def _schema_route(document: dict, template: str, method: str) -> Route | None:
    op = document["paths"].get(template, {}).get(method)
    if op is None:
        return None
    body = op.get("requestBody")
    ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1] if body else None
    return Route(template, method, op["operationId"], ref)


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


def path_matches(template: str, path: str) -> bool:
    return re.fullmatch(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)), path) is not None


def operation(method: str, path: str) -> tuple[str | None, dict | None]:
    """The schema's path template that `path` matches, and its operation for `method` (None when it has none)."""
    for template, item in schema()["paths"].items():
        if path_matches(template, path):
            return template, item.get(method.lower())
    return None, None


def route(method: str, path: str) -> tuple[str | None, list[str], Route | None]:
    """The path template that `path` matches (None: no route), its methods, and the route for `method` (None: the
    path has no such method): the schema's when it is at hand, else ROUTES'."""
    if schema_available():
        template, _ = operation(method, path)
        if template is None:
            return None, [], None
        methods = [m for m in schema()["paths"][template] if m != "parameters"]
        return template, methods, _schema_route(schema(), template, method.lower())
    for template in dict.fromkeys(r.template for r in ROUTES):
        if path_matches(template, path):
            served = {r.method: r for r in ROUTES if r.template == template}
            return template, list(served), served.get(method.lower())
    return None, [], None


def _response_pointer(op: dict, status: int) -> str | None:
    """The schema of `op`'s answer with `status` (a $ref'd response followed), None for an answer without a body."""
    response = op["responses"].get(str(status)) or op["responses"]["default"]
    if "$ref" in response:
        response = schema()["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    content = response.get("content")
    if not content:
        return None
    return next(iter(content.values()))["schema"]["$ref"].removeprefix("#")


def example_pod(pod_id: str, status: str = "RUNNING") -> dict[str, Any]:
    """The Pod that podAction answers, for this id: the schema's own example, or without the schema a minimal one."""
    if not schema_available():
        return {"id": pod_id, "status": status, "actions": ["start"] if status == "EXITED" else ["stop"]}
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
        template, methods, op = route(self.command, path)
        if template is None:
            return self._problem(404, f"no route {self.command} {path}")
        if op is None:
            return self._problem(405, "The requested method is not allowed for this path.",
                                 Allow=", ".join(m.upper() for m in methods))
        if RunPodApi.key is not None and self.headers.get("authorization") != f"Bearer {RunPodApi.key}":
            return self._problem(401, "missing bearer token" if not self.headers.get("authorization")
                                 else "invalid bearer token", op)
        if op.body:
            if self.headers.get("content-type", "").partition(";")[0].strip() != "application/json":
                return self._problem(400, "request body must be application/json", op)
            if body is ValueError or body is None:
                return self._problem(400, "request body is not JSON", op)
            errors = violations(body, f"/components/schemas/{op.body}") if schema_available() else []
            if errors:
                return self._problem(422, "Request validation failed.", op, errors=errors)
        self._serve(op, path, body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

    def _serve(self, op: Route, path: str, body: Any) -> None:
        name, ident = op.operation_id, path.rstrip("/").rsplit("/", 2)
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
                   if getattr(route(call["method"], call["path"].partition("?")[0])[2], "operation_id", None)
                   == operation_id)

    def _json(self, op: Route | None, status: int, data: Any, content_type: str = "application/json",
              **headers: str) -> None:
        if op is not None and schema_available():
            pointer = _response_pointer(schema()["paths"][op.template][op.method], status)
            problems = violations(data, pointer) if pointer else []
            if problems:  # the stand-in's own mistake: a test must see it, never a client
                raise AssertionError(f"the stand-in's answer {status} breaks RunPod's schema: {problems}")
        self._send(status, json.dumps(data).encode(), {"Content-Type": content_type, **headers})

    def _problem(self, status: int, detail: str, op: Route | None = None, errors: list[str] | None = None,
                 **headers: str) -> None:
        problem: dict[str, Any] = {"title": TITLES.get(status, "Error"), "status": status, "detail": detail}
        if errors:
            problem["errors"] = errors
        if status == 429:
            headers.setdefault("Retry-After", "1")
        self._json(op, status, problem, "application/problem+json", **headers)

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
                    "/components/schemas/ErrorResponse") if schema_available() else ():
        _validator(pointer)  # built before the first request: its time is not the first answer's
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v2"
