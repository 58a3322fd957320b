"""RunPod's REST API v2 as both sides read it (entrypoint/runpodapi.py), and the stand-in of it
(prebake_testing/runpod_api.py) answering only what v2 answers, with RunPod's schema as the judge where it is at
hand (the tests marked needs_runpod_schema; skipped without it)."""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from entrypoint import runpodapi
from prebake_testing import runpod_api
from prebake_testing.net import request
from prebake_testing.runpod_api import POD_KEY, RunPodApi, serve_runpod_api, violations

AUTH = {"authorization": f"Bearer {POD_KEY}"}
PROBLEM = "/components/schemas/ErrorResponse"
needs_runpod_schema = pytest.mark.needs_runpod_schema


@pytest.fixture
def port() -> Iterator[int]:
    server, _ = serve_runpod_api()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_pod_stop_prebake_sends_is_what_v2_accepts(port: int) -> None:
    status, headers, raw = request(port, "POST", f"/v2{runpodapi.pod_action_path('abc')}", runpodapi.STOP_ACTION, AUTH)
    assert status == 200 and json.loads(raw)["id"] == "abc" and json.loads(raw)["status"] == "EXITED"


@needs_runpod_schema
def test_the_pod_stop_is_v2s_pod_action_request() -> None:
    assert violations(runpodapi.STOP_ACTION, "/components/schemas/PodActionRequest") == []


@pytest.mark.parametrize("method, path, body, code, said", [
    # v1's stop: its path is not v2's
    ("POST", "/v1/pods/abc/stop", None, 404, "no route POST /v1/pods/abc/stop"),
    ("POST", "/v2/pods/abc/stop", None, 404, "no route POST /v2/pods/abc/stop"),
    # v2's path with v1's bodiless request, then (by the schema) an action v2 dropped, an extra field, a wrong type
    ("POST", "/v2/pods/abc/action", None, 400, "request body is not JSON"),
    pytest.param("POST", "/v2/pods/abc/action", {"action": "reset"}, 422, "$.action: 'reset' is not one of",
                 marks=needs_runpod_schema),
    pytest.param("POST", "/v2/pods/abc/action", {"action": "stop", "force": True}, 422, "'force' was unexpected",
                 marks=needs_runpod_schema),
    pytest.param("POST", "/v2/pods/abc/action", {"action": 1}, 422, "$.action: 1 is not one of",
                 marks=needs_runpod_schema),
    ("PUT", "/v2/pods/abc/action", {"action": "stop"}, 405, "not allowed"),
])
def test_what_v2_refuses_the_stand_in_refuses_with_a_problem(port, method, path, body, code, said) -> None:
    """Each refusal is an RFC 9457 problem (with the schema, the stand-in also checks it is v2's ErrorResponse)."""
    status, headers, raw = request(port, method, path, body, AUTH)
    problem = json.loads(raw)
    assert status == code and headers["content-type"] == "application/problem+json"
    assert problem["status"] == code and problem["title"] and problem["detail"]
    assert said in problem["detail"] + " ".join(problem.get("errors", [])), problem
    if code == 405:
        assert headers["allow"] == "POST"


def test_a_request_without_the_key_is_a_401(port: int) -> None:
    status, _, raw = request(port, "POST", "/v2/pods/abc/action", runpodapi.STOP_ACTION)
    assert status == 401 and json.loads(raw)["detail"] == "missing bearer token"


@needs_runpod_schema
def test_a_v1_template_body_is_refused_and_each_field_named(port: int) -> None:
    v1 = {"name": "t", "imageName": "ghcr.io/o/p:t", "containerDiskInGb": 30, "isPublic": False}
    status, _, raw = request(port, "POST", "/v2/templates", v1, AUTH)
    problem = json.loads(raw)
    assert status == 422 and "$: 'image' is a required property" in problem["errors"]
    assert "'containerDiskInGb', 'imageName', 'isPublic', 'name' were unexpected" in " ".join(problem["errors"])
    assert RunPodApi.templates == {}
    # and what prebake's parser makes of it: the title, the detail and every error, on one line
    said = runpodapi.problem_text(raw)
    assert said.startswith("Unprocessable Entity: Request validation failed. ($: 'image' is a required property; ")


def test_lists_are_wrapped(port: int) -> None:
    request(port, "POST", "/v2/templates", {"name": "t", "image": "ghcr.io/o/p:t"}, AUTH)
    status, _, raw = request(port, "GET", "/v2/templates", None, AUTH)
    listed = json.loads(raw)
    assert status == 200 and [t["name"] for t in listed["templates"]] == ["t"]


@needs_runpod_schema
def test_the_stand_ins_answers_are_v2s(port: int) -> None:
    """Its answers are what the schema says RunPod answers, and its route table (what it serves without the schema)
    is the schema's."""
    request(port, "POST", "/v2/templates", {"name": "t", "image": "ghcr.io/o/p:t"}, AUTH)
    _, _, raw = request(port, "GET", "/v2/templates", None, AUTH)
    assert violations(json.loads(raw), "/components/schemas/ListTemplatesResponse") == []
    _, _, raw = request(port, "POST", "/v2/pods/abc/action", runpodapi.STOP_ACTION, AUTH)
    assert violations(json.loads(raw), "/components/schemas/Pod") == []
    for route in runpod_api.ROUTES:  # the built-in route table is the schema's
        assert runpod_api._schema_route(runpod_api.schema(), route.template, route.method) == route


def test_the_stand_in_serves_its_routes_alone_without_the_schema(port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no schema, what v2 has but the stand-in does not serve is a 404 or 405, and a Pod is a minimal one."""
    monkeypatch.setattr(runpod_api, "schema_available", lambda: False)
    assert request(port, "GET", "/v2/pods/abc", None, AUTH)[0] == 404
    status, headers, _ = request(port, "DELETE", "/v2/templates/tpl1", None, AUTH)
    assert status == 405 and headers["allow"] == "PATCH"
    status, _, raw = request(port, "POST", "/v2/pods/abc/action", {"action": "start"}, AUTH)
    assert status == 200 and json.loads(raw) == {"id": "abc", "status": "RUNNING", "actions": ["stop"]}


@pytest.mark.parametrize("raw, said", [
    (b'{"title": "Not Found", "status": 404, "detail": "pod not found"}', "Not Found: pod not found"),
    (b'{"title": "Bad Request", "status": 400, "detail": "Bad Request"}', "Bad Request"),
    (b'{"title": "Unprocessable Entity", "status": 422, "detail": "Request validation failed.", '
     b'"errors": ["$.disk: x", "$: y"]}', "Unprocessable Entity: Request validation failed. ($.disk: x; $: y)"),
    (b'{"message": "Pod not found"}', "Pod not found"),  # v1's form, or a proxy's
    (b'{"title": "\\ud800 odd\\nline", "status": 500, "detail": "d"}', "\\ud800 odd line: d"),  # one line that encodes
    (b"<html>bad gateway</html>", "<html>bad gateway</html>"),
    (b"", "empty body"),
])
def test_one_parser_reads_runpods_errors(raw: bytes, said: str) -> None:
    assert runpodapi.problem_text(raw) == said


@pytest.mark.parametrize("value, seconds", [("12", 12), (" 3 ", 3), (None, None), ("soon", None), ("-1", None),
                                            ("1.5", None), ("99999999", None), ("999999", 86_400)])
def test_retry_after_is_integer_seconds(value, seconds) -> None:
    assert runpodapi.retry_after_s(value) == seconds
