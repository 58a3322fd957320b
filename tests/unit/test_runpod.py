"""The RunPod template: its payload, the REST requests (checked by a local server that knows RunPod's schema),
and `./build.py runpod template|publish` run through build.py's main on the real variants in images/."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any, Iterator, Mapping

import pytest

from prebake import runpod
from prebake.cli import main
from prebake.errors import PrebakeError
from prebake.variants import load_variants

KEY = "rpa_TESTKEY_0123456789abcdef"
IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234"
GB = 10**9

# RunPod REST API v1, written out here independently of prebake/runpod.py so that a wrong field name there fails.
# TemplateCreateInput: https://docs.runpod.io/api-reference/templates/POST/templates
#   required: imageName, name; category in NVIDIA|AMD|CPU; ports as "<port>/<http|tcp>"; env as an object.
# TemplateUpdateInput: https://docs.runpod.io/api-reference/templates/PATCH/templates/templateId
#   the same fields less category and isServerless, all optional.
CREATE_FIELDS: Mapping[str, type | tuple[type, ...]] = MappingProxyType({
    "category": str, "containerDiskInGb": int, "containerRegistryAuthId": str, "dockerEntrypoint": list,
    "dockerStartCmd": list, "env": dict, "imageName": str, "isPublic": bool, "isServerless": bool,
    "name": str, "ports": list, "readme": str, "volumeInGb": int, "volumeMountPath": str,
})
CREATE_REQUIRED = ("imageName", "name")
UPDATE_FIELDS = MappingProxyType({k: v for k, v in CREATE_FIELDS.items() if k not in ("category", "isServerless")})


def schema_errors(body: Any, fields: Mapping[str, Any], required: tuple[str, ...]) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    errors = [f"unknown field {k!r}" for k in body if k not in fields]
    errors += [f"missing required field {k!r}" for k in required if k not in body]
    for key, value in body.items():
        kind = fields.get(key)
        if kind is None:
            continue
        # bool is an int in Python; RunPod's integers are not booleans
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            errors.append(f"{key!r} must be {kind}, got {value!r}")
    if body.get("category", "NVIDIA") not in ("NVIDIA", "AMD", "CPU"):
        errors.append("category must be NVIDIA, AMD or CPU")
    for port in body.get("ports", []):
        number, _, proto = str(port).partition("/")
        if not number.isdigit() or proto not in ("http", "tcp"):
            errors.append(f"port {port!r} is not <port>/<http|tcp>")
    for name in ("dockerEntrypoint", "dockerStartCmd"):
        if not all(isinstance(item, str) for item in body.get(name, [])):
            errors.append(f"{name} must be a list of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in body.get("env", {}).items()):
        errors.append("env must map strings to strings")
    return errors


@dataclass
class FakeRunPod:
    """Records each request; answers like RunPod, or with `refuse` = (status, body) when set."""

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    refuse: tuple[int, bytes] | None = None


@pytest.fixture
def fake_runpod() -> Iterator[FakeRunPod]:
    state = FakeRunPod()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest's output clean
            pass

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append({"method": self.command, "path": self.path,
                                   "headers": dict(self.headers), "raw": raw})
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                return self._answer(401, b'{"error": "invalid api key"}')
            if self.headers.get("Content-Type") != "application/json":
                return self._answer(415, b'{"error": "content type must be application/json"}')
            try:
                body = json.loads(raw)
            except ValueError:
                return self._answer(400, b'{"error": "body is not JSON"}')
            if self.command == "POST" and self.path == "/v1/templates":
                errors = schema_errors(body, CREATE_FIELDS, CREATE_REQUIRED)
            elif self.command == "PATCH" and self.path.startswith("/v1/templates/"):
                errors = schema_errors(body, UPDATE_FIELDS, ())
            else:
                return self._answer(404, json.dumps({"error": f"no route {self.command} {self.path}"}).encode())
            if errors:
                return self._answer(400, json.dumps({"error": "; ".join(errors)}).encode())
            if state.refuse:
                return self._answer(*state.refuse)
            template_id = self.path.rsplit("/", 1)[1] if self.command == "PATCH" else "tpl0123abcd"
            self._answer(200, json.dumps({"id": template_id, **body}).encode())

        do_POST = do_PATCH = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Variant:
    """A test double with the fields of prebake.variants.Variant that a template reads."""

    name: str = "a40"
    description: str = "A40 pairs"
    gpus: tuple[str, ...] = ("NVIDIA A40", "NVIDIA RTX A6000")
    launch_defaults: Mapping[str, str] = field(default_factory=lambda: {"VL_MODEL": "ornith", "VL_PORT": "8080"})


def api(state: FakeRunPod, key: str = KEY) -> runpod.Api:
    return runpod.Api(key=key, base_url=state.base_url, timeout_s=5)


# ---- the payload -------------------------------------------------------------------------------------------------

def test_payload_matches_runpods_create_schema() -> None:
    payload = runpod.build_template(Variant(), IMAGE, int(8.3 * GB))
    assert schema_errors(payload, CREATE_FIELDS, CREATE_REQUIRED) == []
    assert payload["imageName"] == IMAGE
    assert payload["name"] == "prebake-a40-vllm0.27.1-cu13.0-abc1234"
    assert payload["ports"] == ["8080/http"]
    assert payload["isServerless"] is False and payload["isPublic"] is False


def test_container_disk_is_image_size_plus_cache_room() -> None:
    payload = runpod.build_template(Variant(), IMAGE, int(8.3 * GB))
    assert payload["containerDiskInGb"] == 9 + runpod.CACHE_HEADROOM_GB
    assert runpod.container_disk_gb(8 * GB, headroom_gb=5) == 13  # exact GB do not round up
    assert runpod.container_disk_gb(8 * GB + 1, headroom_gb=5) == 14
    with pytest.raises(PrebakeError, match="positive"):
        runpod.container_disk_gb(0)


def test_weights_and_compile_cache_live_on_the_volume() -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    mount = payload["volumeMountPath"]
    assert payload["volumeInGb"] >= 1
    assert payload["env"]["HF_HOME"].startswith(mount + "/")
    assert payload["env"]["VLLM_CACHE_ROOT"].startswith(mount + "/")


def test_env_has_the_variants_launch_defaults_and_the_port_follows_vl_port() -> None:
    variant = Variant(launch_defaults={"VL_MODEL": "qwen", "VL_PORT": "9000", "VL_TP": "2"})
    payload = runpod.build_template(variant, IMAGE, 8 * GB)
    assert {"VL_MODEL": "qwen", "VL_PORT": "9000", "VL_TP": "2"}.items() <= payload["env"].items()
    assert payload["ports"] == ["9000/http"]
    options = runpod.TemplateOptions(extra_env={"VL_MODEL": "other"}, registry_auth_id="cred1", volume_gb=50)
    payload = runpod.build_template(variant, IMAGE, 8 * GB, options)
    assert payload["env"]["VL_MODEL"] == "other"
    assert payload["containerRegistryAuthId"] == "cred1" and payload["volumeInGb"] == 50


@pytest.mark.parametrize("image, message", [
    ("ghcr.io/owner/prebake:latest", "not a versioned tag"),
    ("ghcr.io/owner/prebake", "no tag"),
    ("localhost:5000/prebake", "no tag"),
    ("ghcr.io/owner/prebake:a40", "not a versioned tag"),
    ("ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0", "not a versioned tag"),
    ("ghcr.io/owner/prebake:ada-vllm0.27.1-cu13.0-abc1234", "variant 'ada', not 'a40'"),
    ("ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234def567-dirty", "uncommitted changes"),
    # a full commit hash, as copied from GitHub: builds push its first 12 digits, so no image has this tag
    ("ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-" + "0123456789ab" + "c" * 28,
     r"no build pushes the revision .* first 12 hex digits .*a40-vllm0\.27\.1-cu13\.0-0123456789ab,"),
])
def test_moving_or_foreign_tags_are_refused(image: str, message: str) -> None:
    with pytest.raises(PrebakeError, match=message):
        runpod.build_template(Variant(), image, 8 * GB)


def test_versioned_tags_and_digests_are_accepted() -> None:
    runpod.check_image_ref("localhost:5000/prebake:a40-vllm0.27.1-cu13.0-0123456789ab", "a40")
    runpod.check_image_ref("ghcr.io/owner/prebake:rtx-pro-vllm0.27.1-cu13.0-abc1234", "rtx-pro")
    runpod.check_image_ref("ghcr.io/owner/prebake:test-cu13.0-abc1234def567", "test")  # a variant without vLLM
    digest = "ghcr.io/owner/prebake@sha256:" + "ab" * 32
    payload = runpod.build_template(Variant(), digest, 8 * GB)
    assert payload["imageName"] == digest and payload["name"] == "prebake-a40-abababababab"


def test_update_body_has_only_update_fields() -> None:
    body = runpod.update_body(runpod.build_template(Variant(), IMAGE, 8 * GB))
    assert schema_errors(body, UPDATE_FIELDS, ()) == []


# ---- the REST requests -------------------------------------------------------------------------------------------

def test_create_posts_the_payload_with_the_key_as_bearer(fake_runpod: FakeRunPod) -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    result = runpod.publish(api(fake_runpod), payload)
    assert result["id"] == "tpl0123abcd"
    (request,) = fake_runpod.requests
    assert (request["method"], request["path"]) == ("POST", "/v1/templates")
    assert json.loads(request["raw"]) == payload


def test_update_patches_the_template_by_id(fake_runpod: FakeRunPod) -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    result = runpod.publish(api(fake_runpod), payload, template_id="abc123xyz")
    assert result["id"] == "abc123xyz"
    (request,) = fake_runpod.requests
    assert (request["method"], request["path"]) == ("PATCH", "/v1/templates/abc123xyz")
    assert "category" not in json.loads(request["raw"])


def test_the_schema_server_rejects_a_wrong_field(fake_runpod: FakeRunPod) -> None:
    """The fake is strict: a misspelt field is refused, so the tests above would catch one in runpod.py."""
    payload = {**runpod.build_template(Variant(), IMAGE, 8 * GB), "containerDiskGb": 30}
    with pytest.raises(PrebakeError, match=r"HTTP 400: unknown field 'containerDiskGb'"):
        runpod.create_template(api(fake_runpod), payload)
    bad_type = {**runpod.build_template(Variant(), IMAGE, 8 * GB), "volumeInGb": "200"}
    with pytest.raises(PrebakeError, match="'volumeInGb' must be"):
        runpod.create_template(api(fake_runpod), bad_type)


def test_a_refused_request_names_the_status_and_runpods_message_without_the_key(fake_runpod: FakeRunPod) -> None:
    fake_runpod.refuse = (400, json.dumps({"error": f"template name already exists (key {KEY})"}).encode())
    with pytest.raises(PrebakeError) as refused:
        runpod.publish(api(fake_runpod), runpod.build_template(Variant(), IMAGE, 8 * GB))
    message = str(refused.value)
    assert "HTTP 400" in message and "template name already exists" in message
    assert KEY not in message and KEY not in repr(refused.value)


def test_a_wrong_key_is_a_clear_401(fake_runpod: FakeRunPod) -> None:
    with pytest.raises(PrebakeError, match=r"HTTP 401: invalid api key; check RUNPOD_API_KEY"):
        runpod.publish(api(fake_runpod, key="rpa_wrong"), runpod.build_template(Variant(), IMAGE, 8 * GB))


def test_an_unreachable_api_is_a_clear_error() -> None:
    unreachable = runpod.Api(key=KEY, base_url="http://127.0.0.1:9/v1", timeout_s=2)
    with pytest.raises(PrebakeError, match="could not reach RunPod at http://127.0.0.1:9/v1/templates"):
        runpod.publish(unreachable, runpod.build_template(Variant(), IMAGE, 8 * GB))


def test_api_key_and_base_url_come_from_the_environment() -> None:
    with pytest.raises(PrebakeError, match="RUNPOD_API_KEY is not set"):
        runpod.api_from_env(env={})
    assert runpod.api_from_env(env={"RUNPOD_API_KEY": KEY}).base_url == "https://rest.runpod.io/v1"
    api_ = runpod.api_from_env(env={"RUNPOD_API_KEY": KEY, "RUNPOD_REST_URL": "http://127.0.0.1:1/v1/"})
    assert api_.base_url == "http://127.0.0.1:1/v1"
    assert runpod.api_from_env("https://x/v1", env={"RUNPOD_API_KEY": KEY}).base_url == "https://x/v1"
    assert KEY not in repr(api_)


def test_a_template_id_that_is_not_an_id_is_refused(fake_runpod: FakeRunPod) -> None:
    with pytest.raises(PrebakeError, match="not a RunPod id"):
        runpod.update_template(api(fake_runpod), "../pods", {})
    assert fake_runpod.requests == []


# ---- ./build.py runpod ... -------------------------------------------------------------------------------------

def build_py(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `./build.py runpod ARGS` in-process, as the user does; return (exit status, stdout, stderr)."""
    status = main(["runpod", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_template_prints_the_json_with_the_variants_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = build_py(capsys, "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8.3")
    assert status == 0, err
    payload = json.loads(out)
    assert payload["imageName"] == IMAGE
    assert payload["containerDiskInGb"] == 9 + runpod.CACHE_HEADROOM_GB
    assert load_variants()["a40"].launch_defaults.items() <= payload["env"].items()


def test_template_refuses_the_short_tag_and_an_unknown_variant(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = build_py(capsys, "template", "--variant", "a40", "--image", "ghcr.io/owner/prebake:a40",
                                "--image-size-gb", "8")
    assert (status, out) == (1, "") and err.startswith("error: ") and "not a versioned tag" in err
    status, _, err = build_py(capsys, "template", "--variant", "nope", "--image", IMAGE, "--image-size-gb", "8")
    assert status == 1 and "unknown variant 'nope'" in err and "a40" in err


def test_template_needs_a_size_when_the_image_is_not_local(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runpod, "local_image_size", lambda image: None)
    status, _, err = build_py(capsys, "template", "--variant", "a40", "--image", IMAGE)
    # where to read the size: the build's own `size:` line, or docker image inspect where the image is
    assert status == 1 and "--image-size-gb" in err and "size: N GB" in err and "docker image inspect" in err
    monkeypatch.setattr(runpod, "local_image_size", lambda image: 12 * 10**9)
    status, out, _ = build_py(capsys, "template", "--variant", "a40", "--image", IMAGE)
    assert status == 0 and json.loads(out)["containerDiskInGb"] == 12 + runpod.CACHE_HEADROOM_GB


def test_publish_creates_then_updates_and_never_prints_the_key(fake_runpod: FakeRunPod,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("RUNPOD_REST_URL", fake_runpod.base_url)
    args = ("publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8")
    created = build_py(capsys, *args)
    updated = build_py(capsys, *args, "--template-id", "tpl0123abcd")
    assert created[0] == 0 and "created RunPod template tpl0123abcd" in created[1]
    assert updated[0] == 0 and "updated RunPod template tpl0123abcd" in updated[1]
    assert [r["method"] for r in fake_runpod.requests] == ["POST", "PATCH"]
    fake_runpod.refuse = (403, b'{"error": "forbidden"}')
    refused = build_py(capsys, *args)
    assert refused[0] == 1 and "HTTP 403: forbidden" in refused[2]
    assert all(KEY not in text for result in (created, updated, refused) for text in result[1:])


def test_publish_without_a_key_says_which_variable(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    status, _, err = build_py(capsys, "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8")
    assert status == 1 and "RUNPOD_API_KEY is not set" in err


@pytest.mark.docker
def test_local_image_size_reads_the_docker_engine() -> None:
    """The size comes from the Docker SDK for an image the engine has, and is None for one it does not."""
    import io
    import tarfile

    import docker

    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        data = b"x" * 100_000
        info = tarfile.TarInfo("payload")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    client = docker.from_env()
    ref = "prebake-test-runpod-size:a40-vllm0.27.1-cu13.0-abc1234"
    client.api.import_image_from_data(layer.getvalue(), repository=ref.split(":")[0], tag=ref.split(":")[1])
    try:
        assert runpod.local_image_size(ref) == client.images.get(ref).attrs["Size"] >= 100_000
        assert runpod.local_image_size("prebake-test-runpod-size:not-there") is None
    finally:
        client.images.remove(ref, force=True)
        client.close()


def test_every_revision_a_build_pushes_is_accepted() -> None:
    """What source_revision makes of a commit (12 digits) and of any --revision is a tag the template takes."""
    from prebake.tags import source_revision
    for given in ("0123456789ab" + "c" * 28, "release1", "layers", "v0.2.0", "0123456789AB" + "C" * 28):
        pushed = source_revision(given).short
        runpod.check_image_ref(f"ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-{pushed}", "a40")


def test_an_upper_case_owner_is_a_usage_error_that_says_how(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = build_py(capsys, "template", "--variant", "a40", "--image",
                                "ghcr.io/OWNER/prebake:a40-vllm0.27.1-cu13.0-0123456789ab", "--image-size-gb", "8")
    assert status == 2 and out == "" and "'OWNER' has upper-case letters" in err and "use 'owner'" in err
