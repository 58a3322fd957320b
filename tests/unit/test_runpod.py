"""The RunPod template: its payload, the REST v2 requests (checked by the stand-in of RunPod's API, which validates
every request against RunPod's own published schema when it is at hand), and `./build.py runpod template|publish`
run through build.py's main on the real variants in images/. The tests marked needs_runpod_schema check against
that schema (prebake_testing/runpod_api.py says where it is looked for) and are skipped without it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

import pytest

from prebake import runpod
from prebake.cli import main
from prebake.errors import PrebakeError
from prebake.variants import load_variants
from prebake_testing import runpod_api
from prebake_testing.runpod_api import RunPodApi, schema_path, serve_runpod_api, violations
from prebake_testing.template_inputs import IMAGE, Variant

KEY = "rpa_TESTKEY_0123456789abcdef"
GB = 10**9
CREATE = "/components/schemas/CreateTemplateRequest"
UPDATE = "/components/schemas/UpdateTemplateRequest"


@pytest.fixture
def stand_in() -> Iterator[str]:
    """RunPod's API v2 (prebake_testing.runpod_api), answering KEY; its base URL."""
    server, url = serve_runpod_api()
    RunPodApi.key = KEY
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def api(url: str, key: str = KEY) -> runpod.Api:
    return runpod.Api(key=key, base_url=url, timeout_s=5)


def writes() -> list[tuple[str, str]]:
    return [(call["method"], call["path"]) for call in RunPodApi.calls if call["method"] != "GET"]


# ---- the payload -------------------------------------------------------------------------------------------------

needs_runpod_schema = pytest.mark.needs_runpod_schema


@needs_runpod_schema
def test_the_schema_is_the_pinned_one() -> None:
    """The file found is RunPod's v2 schema as pinned in prebake_testing/runpod_api.py: its bytes, version, form."""
    path = schema_path()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == runpod_api.SCHEMA_SHA256
    document = json.loads(path.read_text())
    assert document["openapi"].startswith("3.1") and document["info"]["version"] == runpod_api.SCHEMA_VERSION


def test_the_schema_is_looked_for_in_the_variable_then_beside_the_checkout(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    monkeypatch.delenv(runpod_api.SCHEMA_VARIABLE, raising=False)
    assert schema_path() == runpod_api.REPO.parent / "shared" / "runpod" / "openapi-v2.json"
    monkeypatch.setenv(runpod_api.SCHEMA_VARIABLE, str(tmp_path / "openapi.json"))
    assert schema_path() == tmp_path / "openapi.json"
    with pytest.raises(runpod_api.SchemaError, match=rf"\$PREBAKE_RUNPOD_OPENAPI is '{tmp_path}/openapi.json', which "
                       r"is not a file: copy api-reference-v2/openapi.json of github.com/runpod/docs at commit "
                       r"a900806e253c4f8c16da27d1a4370e72456da4cb to .*/shared/runpod/openapi-v2.json or set "
                       r"PREBAKE_RUNPOD_OPENAPI to its path"):
        runpod_api.schema_available()


def test_a_schema_that_is_not_the_pinned_file_is_an_error_naming_it(tmp_path: Path) -> None:
    other = tmp_path / "openapi.json"
    other.write_text('{"openapi": "3.1.0", "info": {"version": "2.1.0"}, "paths": {}}')
    with pytest.raises(runpod_api.SchemaError, match=rf"{other}: sha256 [0-9a-f]{{64}}, not "
                       rf"{runpod_api.SCHEMA_SHA256}: it is not the api-reference-v2/openapi.json of "
                       r"github.com/runpod/docs at commit a900806e253c4f8c16da27d1a4370e72456da4cb"):
        runpod_api.load_schema(other)


@needs_runpod_schema
@pytest.mark.parametrize("options", [runpod.TemplateOptions(), runpod.TemplateOptions(volume_gb=10),
                                     runpod.TemplateOptions(extra_env={"VL_MODEL": "other"}, registry_auth_id="cred1",
                                                            volume_gb=50)], ids=["defaults", "floor", "options"])
def test_every_payload_is_a_v2_create_and_update_request(options: runpod.TemplateOptions) -> None:
    payload = runpod.build_template(Variant(), IMAGE, int(8.3 * GB), options)
    assert violations(payload, CREATE) == [] and violations(payload, UPDATE) == []


def test_payload_has_v2s_fields() -> None:
    payload = runpod.build_template(Variant(), IMAGE, int(8.3 * GB))
    assert payload["image"] == IMAGE
    assert payload["name"] == "prebake-a40-vllm0.27.1-cu13.0-abc1234"
    assert payload["ports"] == ["8080/http"] and payload["category"] == "NVIDIA"
    assert payload["serverless"] is False and payload["public"] is False
    assert payload["startSsh"] is False and payload["startJupyter"] is False and "args" not in payload
    assert payload["registry"] is None  # sent, so that an update clears a credential the template no longer needs


@needs_runpod_schema
def test_a_v1_shaped_body_is_refused_by_the_schema() -> None:
    """What prebake sent to v1: every renamed field is named, and the missing `image`."""
    v1 = {"name": "t", "imageName": IMAGE, "containerDiskInGb": 29, "volumeInGb": 200, "volumeMountPath": "/workspace",
          "isPublic": False, "isServerless": False, "readme": "# t", "dockerEntrypoint": [], "dockerStartCmd": [],
          "category": "NVIDIA", "ports": ["8080/http"], "env": {}}
    found = violations(v1, CREATE)
    assert "$: 'image' is a required property" in found
    for name in ("imageName", "containerDiskInGb", "volumeInGb", "isPublic", "readme", "dockerStartCmd"):
        assert any(name in line and "Unevaluated properties" in line for line in found), (name, found)


def test_container_disk_is_image_size_plus_cache_room() -> None:
    payload = runpod.build_template(Variant(), IMAGE, int(8.3 * GB))
    assert payload["disk"] == 9 + runpod.CACHE_HEADROOM_GB
    assert runpod.container_disk_gb(8 * GB, headroom_gb=5) == 13  # exact GB do not round up
    assert runpod.container_disk_gb(8 * GB + 1, headroom_gb=5) == 14
    with pytest.raises(PrebakeError, match="positive"):
        runpod.container_disk_gb(0)


def test_weights_and_compile_cache_live_on_the_volume() -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    volume = payload["mounts"]["persistent"]
    assert volume == {"size": runpod.DEFAULT_VOLUME_GB, "path": "/workspace"}
    assert payload["env"]["HF_HOME"].startswith(volume["path"] + "/")
    assert payload["env"]["VLLM_CACHE_ROOT"].startswith(volume["path"] + "/")


@needs_runpod_schema
def test_runpods_volume_floor_is_the_schemas() -> None:
    """v2's PersistentMount.size has a minimum of 10, the floor build_template holds to."""
    small = {"name": "t", "image": IMAGE, "mounts": {"persistent": {"size": 9, "path": "/workspace"}}}
    assert violations(small, CREATE)[0] == "$.mounts.persistent.size: 9 is less than the minimum of 10"


def test_a_volume_under_runpods_floor_is_refused() -> None:
    """The template says so before RunPod does."""
    with pytest.raises(PrebakeError, match="at least 10 GB"):
        runpod.build_template(Variant(), IMAGE, 8 * GB, runpod.TemplateOptions(volume_gb=9))
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB, runpod.TemplateOptions(volume_gb=10))
    assert payload["mounts"]["persistent"]["size"] == 10


def test_env_has_the_variants_launch_defaults_and_the_port_follows_vl_port() -> None:
    variant = Variant(launch_defaults={"VL_MODEL": "qwen", "VL_PORT": "9000", "VL_TP": "2"})
    payload = runpod.build_template(variant, IMAGE, 8 * GB)
    assert {"VL_MODEL": "qwen", "VL_PORT": "9000", "VL_TP": "2"}.items() <= payload["env"].items()
    assert payload["ports"] == ["9000/http"]
    options = runpod.TemplateOptions(extra_env={"VL_MODEL": "other"}, registry_auth_id="cred1", volume_gb=50)
    payload = runpod.build_template(variant, IMAGE, 8 * GB, options)
    assert payload["env"]["VL_MODEL"] == "other"
    assert payload["registry"] == "cred1" and payload["mounts"]["persistent"]["size"] == 50


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
    assert payload["image"] == digest and payload["name"] == "prebake-a40-abababababab"


# ---- the REST requests -------------------------------------------------------------------------------------------

def test_create_lists_then_posts_the_payload_with_the_key_as_bearer(stand_in: str) -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    verb, result = runpod.publish(api(stand_in), payload)
    assert verb == "created" and result["id"] == "tpl00001" and result["image"] == IMAGE
    assert [(c["method"], c["path"]) for c in RunPodApi.calls] == [("GET", "/v2/templates"), ("POST", "/v2/templates")]
    assert all(call["auth"] == f"Bearer {KEY}" for call in RunPodApi.calls)
    assert RunPodApi.calls[1]["body"] == payload and RunPodApi.templates["tpl00001"]["disk"] == payload["disk"]


def test_update_patches_the_template_by_id_or_found_by_name(stand_in: str) -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    _, created = runpod.publish(api(stand_in), payload)
    newer = {**payload, "disk": payload["disk"] + 5}
    verb, result = runpod.publish(api(stand_in), newer)  # the same name: found, then patched
    assert verb == "updated (found by name)" and result["id"] == created["id"] and result["disk"] == newer["disk"]
    verb, result = runpod.publish(api(stand_in), {**payload, "name": "renamed"}, template_id=created["id"])
    assert verb == "updated" and result["name"] == "renamed" and len(RunPodApi.templates) == 1
    assert writes() == [("POST", "/v2/templates"), ("PATCH", f"/v2/templates/{created['id']}"),
                        ("PATCH", f"/v2/templates/{created['id']}")]


def test_an_update_leaves_nothing_of_the_old_template_behind(stand_in: str) -> None:
    """v2's PATCH changes only what it is sent: the whole body goes, a dropped registry credential as null."""
    private = runpod.build_template(Variant(), IMAGE, 8 * GB, runpod.TemplateOptions(registry_auth_id="cred1"))
    _, created = runpod.publish(api(stand_in), private)
    assert RunPodApi.templates[created["id"]]["registry"] == "cred1"
    runpod.publish(api(stand_in), runpod.build_template(Variant(), IMAGE, 8 * GB))
    assert RunPodApi.templates[created["id"]]["registry"] is None


def test_two_templates_of_the_name_are_not_guessed_between(stand_in: str) -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    runpod.create_template(api(stand_in), payload)
    runpod.create_template(api(stand_in), payload)
    with pytest.raises(PrebakeError, match=r"2 templates .* tpl00001, tpl00002\): pass --template-id"):
        runpod.publish(api(stand_in), payload)
    assert writes() == [("POST", "/v2/templates")] * 2


@pytest.mark.parametrize("change, refused", [
    ({"containerDiskInGb": 30}, r"HTTP 422: Unprocessable Entity: Request validation failed\. \(.*'containerDiskInGb'"),
    ({"disk": "30"}, r"\$\.disk: '30' is not of type 'integer'"),
    ({"image": None}, r"\$\.image: None is not of type 'string'"),
    ({"mounts": {"persistent": {"size": 200}}}, r"\$\.mounts\.persistent: 'path' is a required property"),
])
@needs_runpod_schema
def test_the_stand_in_refuses_what_the_schema_refuses_and_the_error_names_the_field(stand_in, change, refused) -> None:
    """The stand-in is RunPod's schema: a misspelt field, a wrong type, a missing one are refused with a 422 whose
    `errors` name it, as v2 does, and the error prebake prints carries them; nothing is written."""
    payload = {**runpod.build_template(Variant(), IMAGE, 8 * GB), **change}
    with pytest.raises(PrebakeError, match=refused) as error:
        runpod.create_template(api(stand_in), payload)
    assert "nothing was changed" in str(error.value) and RunPodApi.templates == {}


def test_a_v1_request_gets_what_v2_answers_it(stand_in: str) -> None:
    """v1's paths are not v2's: a client still speaking v1 through a v2 base gets a 404 problem."""
    v1 = runpod.Api(key=KEY, base_url=stand_in, timeout_s=5)
    with pytest.raises(PrebakeError, match=r"HTTP 404: Not Found: no route POST /v2/pods/abc/stop"):
        runpod._request(v1, "POST", "/pods/abc/stop", {})


def test_a_refused_template_leaves_the_account_as_it_was_and_says_what_runpod_said(stand_in: str) -> None:
    payload = runpod.build_template(Variant(), IMAGE, 8 * GB)
    _, created = runpod.publish(api(stand_in), payload)
    before = json.dumps(RunPodApi.templates, sort_keys=True)
    RunPodApi.template_answers = [{"status": 400, "detail": f"image cannot be pulled (key {KEY})",
                                   "errors": ["$.image: registry denied"]}]
    with pytest.raises(PrebakeError) as refused:
        runpod.publish(api(stand_in), {**payload, "image": IMAGE.replace("abc1234", "def5678")})
    message = str(refused.value)
    assert f"RunPod refused PATCH {stand_in}/templates/{created['id']}: HTTP 400: Bad Request: image cannot be " \
           "pulled (key [redacted]) ($.image: registry denied)" == message
    assert KEY not in message and KEY not in repr(refused.value)
    assert json.dumps(RunPodApi.templates, sort_keys=True) == before


def test_a_rate_limit_is_waited_out_as_retry_after_says(stand_in: str, capsys: pytest.CaptureFixture[str]) -> None:
    RunPodApi.template_answers = [{"status": 429, "detail": "rate limit exceeded for the minute window",
                                   "headers": {"Retry-After": "1"}}]
    slept: list[float] = []
    result = runpod._request(api(stand_in), "POST", "/templates", runpod.build_template(Variant(), IMAGE, 8 * GB),
                             sleep=slept.append)
    assert result["id"] == "tpl00001" and slept == [1]
    assert "waiting 1 s as its Retry-After says" in capsys.readouterr().err
    RunPodApi.template_answers = [{"status": 429, "detail": "rate limit exceeded for the hour window",
                                   "headers": {"Retry-After": "1800"}}]
    with pytest.raises(PrebakeError, match=r"HTTP 429: Too Many Requests: rate limit exceeded for the hour window; "
                                           r"try again in 1800 s \(Retry-After\)"):
        runpod._request(api(stand_in), "POST", "/templates", runpod.build_template(Variant(), IMAGE, 8 * GB),
                        sleep=slept.append)
    assert slept == [1] and len(RunPodApi.templates) == 1


def test_a_wrong_key_is_a_clear_401(stand_in: str) -> None:
    with pytest.raises(PrebakeError, match=r"HTTP 401: Unauthorized: invalid bearer token; check RUNPOD_API_KEY"):
        runpod.publish(api(stand_in, key="rpa_wrong"), runpod.build_template(Variant(), IMAGE, 8 * GB))


def test_an_unreachable_api_is_a_clear_error() -> None:
    unreachable = runpod.Api(key=KEY, base_url="http://127.0.0.1:9/v2", timeout_s=2)
    with pytest.raises(PrebakeError, match="could not reach RunPod at http://127.0.0.1:9/v2/templates"):
        runpod.publish(unreachable, runpod.build_template(Variant(), IMAGE, 8 * GB))


def test_api_key_and_base_url_come_from_the_environment() -> None:
    with pytest.raises(PrebakeError, match="RUNPOD_API_KEY is not set"):
        runpod.api_from_env(env={})
    assert runpod.api_from_env(env={"RUNPOD_API_KEY": KEY}).base_url == "https://api.runpod.io/v2"
    api_ = runpod.api_from_env(env={"RUNPOD_API_KEY": KEY, "RUNPOD_REST_URL": "http://127.0.0.1:1/v2/"})
    assert api_.base_url == "http://127.0.0.1:1/v2"
    assert runpod.api_from_env("https://x/v2", env={"RUNPOD_API_KEY": KEY}).base_url == "https://x/v2"
    assert KEY not in repr(api_)


@pytest.mark.parametrize("url", ["https://rest.runpod.io/v1", "https://rest.runpod.io/v1/", "https://rest.runpod.io",
                                 "https://proxy.example.com/runpod/v1", "http://127.0.0.1:8/v1"])
def test_a_v1_url_is_refused_before_anything_is_sent_and_says_what_to_set(url: str) -> None:
    with pytest.raises(PrebakeError) as refused:
        runpod.api_from_env(env={"RUNPOD_API_KEY": KEY, "RUNPOD_REST_URL": url})
    assert str(refused.value) == (f"$RUNPOD_REST_URL '{url}': RunPod's REST API v1 is retired (RunPod's guide "
                                  "\"Migrate from API v1\"), so nothing is sent there; its v2 is "
                                  "https://api.runpod.io/v2, the default when RUNPOD_REST_URL is unset, or give a v2 "
                                  "base (its path ends in /v2)")


def test_a_template_id_that_is_not_an_id_is_refused(stand_in: str) -> None:
    with pytest.raises(PrebakeError, match="not a RunPod id"):
        runpod.update_template(api(stand_in), "../pods", {})
    assert RunPodApi.calls == []


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
    assert payload["image"] == IMAGE
    assert payload["disk"] == 9 + runpod.CACHE_HEADROOM_GB
    assert load_variants()["a40"].launch_defaults.items() <= payload["env"].items()


@needs_runpod_schema
def test_template_prints_a_v2_create_request(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = build_py(capsys, "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8.3")
    assert status == 0 and violations(json.loads(out), CREATE) == [], err


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
    assert status == 0 and json.loads(out)["disk"] == 12 + runpod.CACHE_HEADROOM_GB


def test_publish_creates_then_updates_and_never_prints_the_key(stand_in: str, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("RUNPOD_REST_URL", stand_in)  # the override variable, with a v2 base
    args = ("publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8")
    created = build_py(capsys, *args)
    again = build_py(capsys, *args)
    by_id = build_py(capsys, *args, "--template-id", "tpl00001")
    assert created[0] == 0 and "created RunPod template tpl00001 'prebake-a40-vllm0.27.1-cu13.0-abc1234' -> " \
        f"{IMAGE} (container disk 28 GB, volume 200 GB at /workspace, ports 8080/http)" in created[1], created
    assert again[0] == 0 and "updated (found by name) RunPod template tpl00001" in again[1]
    assert by_id[0] == 0 and "updated RunPod template tpl00001" in by_id[1]
    assert [method for method, _ in writes()] == ["POST", "PATCH", "PATCH"]
    RunPodApi.template_answers = [{"status": 403, "detail": "access denied"}]
    refused = build_py(capsys, *args)
    assert refused[0] == 1 and "HTTP 403: Forbidden: access denied; the API key lacks write access" in refused[2]
    assert all(KEY not in text for result in (created, again, by_id, refused) for text in result[1:])


def test_publish_to_a_v1_url_sends_nothing(stand_in: str, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    v1 = stand_in.removesuffix("/v2") + "/v1"
    monkeypatch.setenv("RUNPOD_REST_URL", v1)
    status, out, err = build_py(capsys, "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8")
    assert (status, out) == (1, "") and f"error: $RUNPOD_REST_URL '{v1}': RunPod's REST API v1 is retired" in err
    status, out, err = build_py(capsys, "publish", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8",
                                "--base-url", v1)
    assert status == 2 and "v1 is retired" in err
    assert RunPodApi.calls == []


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
