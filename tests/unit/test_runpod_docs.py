"""What the user documentation shows of RunPod's API is v2: every API URL is one of the v2 routes prebake uses
(prebake_testing.runpod_api.ROUTES), each curl carries the key and a JSON body where its route takes one, and
publishing.md's table of the template's fields is what `runpod template` prints; v1 (retired) appears only where a
page says it is retired. Checked against RunPod's own schema where it is at hand (the tests marked
needs_runpod_schema, skipped without it): every URL is a path and method of the schema, every curl's body a valid
request body for its operation, every field of the table a field of CreateTemplateRequest."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from prebake import runpod
from prebake_testing.runpod_api import ROUTES, Route, path_matches, operation, schema, violations
from prebake_testing.template_inputs import IMAGE, Variant

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *(ROOT / "docs" / name for name in
                               ("publishing.md", "idle-stop.md", "quickstart.md", "troubleshooting.md"))]
V1_FIELDS = ("imageName", "containerDiskInGb", "volumeInGb", "volumeMountPath", "isPublic", "isServerless",
             "containerRegistryAuthId", "dockerEntrypoint", "dockerStartCmd")
API_URL = re.compile(r"(?:\b(GET|POST|PATCH|PUT|DELETE) `?)?https://api\.runpod\.io(/(?:<[^>]+>|[^\s`'\")<])*)")


needs_runpod_schema = pytest.mark.needs_runpod_schema


def _lines() -> list[tuple[str, int, str]]:
    return [(page.name, number, line) for page in PAGES for number, line in enumerate(page.read_text().splitlines(), 1)]


def _path(url_path: str) -> str:
    """A URL path as a page writes it, `<pod id>` and the like standing for an id."""
    return re.sub(r"<[^>]+>|\{[^}]+\}", "abc123", url_path.rstrip(".,:;"))


def _api_urls() -> list[tuple[str, str, str]]:
    """Each URL of RunPod's API in the pages but the base itself: where (page:line), its method ('' when the line
    names none), its path."""
    return [(f"{page}:{number}", method, url_path) for page, number, line in _lines()
            for method, url_path in API_URL.findall(line) if url_path.rstrip(".,:;") not in ("/v2", "/v2/")]


def _curls() -> list[tuple[str, list[str], dict[str, str], str, str]]:
    """Each curl command to RunPod's API in the pages' shell blocks, its lines joined, split as the shell does: its
    page, its words, its options, its method and its URL's path."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S):
            for command in block.replace("\\\n", " ").splitlines():
                if "curl" in command and "api.runpod.io" in command:
                    argv = shlex.split(command.replace("<pod id>", "abc123"))
                    options = dict(zip(argv[1::2], argv[2::2]))
                    found.append((page.name, argv, options, options.get("--request", "GET"),
                                  options["--url"].removeprefix("https://api.runpod.io")))
    assert found, "no curl to RunPod's API in the pages"
    return found


def test_v1_appears_only_where_a_page_says_it_is_retired() -> None:
    stale = [f"{page}:{number}: {line.strip()}" for page, number, line in _lines()
             if ("rest.runpod.io" in line or any(f"`{field}`" in line for field in V1_FIELDS) or "/v1/pods" in line
                 or "/v1/templates" in line) and "retired" not in line and "v1 templates" not in line]
    assert not stale, "\n".join(stale)


def _route(method: str, url_path: str) -> Route | None:
    """The route of ROUTES that a page's method and URL path name (any method of the path when none is written)."""
    return next((route for route in ROUTES if path_matches(route.template, _path(url_path))
                 and route.method == (method or route.method).lower()), None)


def test_every_runpod_api_url_is_a_v2_route_prebake_uses() -> None:
    seen = []
    for where, method, url_path in _api_urls():
        route = _route(method, url_path)
        assert route, f"{where}: {method or 'any method of'} {url_path} is not a v2 route prebake uses"
        seen.append(route.template)
    assert {"/v2/templates", "/v2/templates/{id}", "/v2/pods/{id}/action"} <= set(seen), seen


def test_every_curl_to_runpod_carries_the_key_and_a_json_body_where_its_route_takes_one() -> None:
    for page, argv, options, method, url_path in _curls():
        route = _route(method, url_path)
        assert route, f"{page}: {method} {url_path} is not a v2 route prebake uses"
        headers = [value for name, value in zip(argv, argv[1:]) if name == "--header"]
        assert "Authorization: Bearer $RUNPOD_API_KEY" in headers, f"{page}: {argv}"
        if route.body:
            assert "Content-Type: application/json" in headers, f"{page}: {argv}"
            assert isinstance(json.loads(options["--data"]), dict), f"{page}: {argv}"


@needs_runpod_schema
def test_every_runpod_api_url_is_a_path_and_method_of_the_v2_schema() -> None:
    for where, method, url_path in _api_urls():
        template, op = operation(method or "GET", _path(url_path))
        assert template, f"{where}: {url_path} is not a path of RunPod's v2 schema"
        assert op is not None or not method, f"{where}: {template} has no {method}"


@needs_runpod_schema
def test_every_curl_to_runpod_sends_a_body_its_operation_accepts() -> None:
    for page, argv, options, method, url_path in _curls():
        template, op = operation(method, _path(url_path))
        assert op is not None, f"{page}: {method} {url_path} is not an operation of RunPod's v2 schema"
        if "requestBody" in op:
            body_schema = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].removeprefix("#")
            assert violations(json.loads(options["--data"]), body_schema) == [], f"{page}: {argv}"


def _field_table() -> dict[str, str]:
    text = (ROOT / "docs" / "publishing.md").read_text()
    table = text.split("| field | what prebake sets |", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", table, flags=re.M))


def _create_properties() -> set[str]:
    found: set[str] = set()

    def walk(node: dict) -> None:
        if "$ref" in node:
            walk(schema()["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]])
        found.update(node.get("properties", {}))
        for part in node.get("allOf", []):
            walk(part)

    walk(schema()["components"]["schemas"]["CreateTemplateRequest"])
    return found


@needs_runpod_schema
def test_the_field_table_has_v2s_field_names() -> None:
    table = _field_table()
    assert set(table) <= _create_properties(), set(table) - _create_properties()


def test_the_field_table_is_the_template_body() -> None:
    table = _field_table()
    options = runpod.TemplateOptions(registry_auth_id="cred1")
    body = runpod.build_template(Variant(), IMAGE, 8 * 10**9, options)
    assert set(table) == set(body), (set(table) ^ set(body))
    mounts = json.loads(re.search(r"`(\{.*\})`", table["mounts"]).group(1))
    assert mounts == runpod.build_template(Variant(), IMAGE, 8 * 10**9)["mounts"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_pages_say_v2_where_they_name_runpods_rest_api(page: Path) -> None:
    text = page.read_text()
    for match in re.finditer(r"RunPod's (?:REST )?API[^.]*\bv(\d)", text):
        assert match.group(1) == "2" or "retired" in text[match.start():match.start() + 300], match.group(0)
