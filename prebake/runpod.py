"""RunPod pod templates for prebake images: build the JSON payload, create or update it over RunPod's REST API v2.

The body is v2's CreateTemplateRequest (RunPod's schema, runpod/docs api-reference-v2/openapi.json; the paths,
the error form and Retry-After are entrypoint/runpodapi.py's, shared with the pod's idle stop):
  GET   /v2/templates        find the template by name ({"templates": [...]})
  POST  /v2/templates        CreateTemplateRequest, when none has the name
  PATCH /v2/templates/{id}   UpdateTemplateRequest (the same fields), for --template-id or the one found by name
Authentication is `Authorization: Bearer <API key>`. Only the standard library talks HTTP here.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from entrypoint import runpodapi
from entrypoint.contract import DEFAULT_REST_URL, RUNPOD_URL_VARIABLE, runpod_base_url_problem
from entrypoint.redact import mask_values
from entrypoint.safetext import safe
from prebake.errors import PrebakeError
from prebake.references import is_loopback_host, reference_problem
from prebake.tags import REVISION_PATTERN, pushed_revision, revision_problem

DEFAULT_BASE_URL = DEFAULT_REST_URL  # https://api.runpod.io/v2
BASE_URL_ENV = RUNPOD_URL_VARIABLE
API_KEY_ENV = "RUNPOD_API_KEY"

VOLUME_MOUNT_PATH = "/workspace"
# A pod nobody uses for this long asks RunPod to stop it (the launcher's VL_IDLE_STOP, docs/idle-stop.md): an
# hour lets a lunch break or a long meeting pass without a restart (a few minutes, and the GPU may be gone),
# and caps what a pod forgotten overnight costs at about an hour of GPU.
IDLE_STOP_ENV = "VL_IDLE_STOP"
DEFAULT_IDLE_STOP_MIN = "60"
DEFAULT_VOLUME_GB = 200
MIN_VOLUME_GB = 10  # v2's PersistentMount.size: "Upstream enforces a 10 GB floor"
DEFAULT_PORT = "8080"
# Container disk = the unpacked image + this much. What still lands on the container disk once
# HF_HOME and VLLM_CACHE_ROOT are on the volume: the kernels compiled at run time (flashinfer,
# humming, Triton: a few GB across models), torch inductor's files in /tmp, logs. The bootstrap
# script measured vLLM's compile cache alone at ~1.2 GB (reference/vllm_bootstrap.sh, lines 286-288).
# A full container disk kills vLLM mid-request, and disk costs far less than the GPU: 20 GB of room.
CACHE_HEADROOM_GB = 20

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# The versioned tag build.py pushes (prebake/tags.py): <variant>-vllm<version>-cu<cuda>-<revision>; the revision
# pattern is the one `--revision` accepts, so every tag a build pushes is one a template takes.
_VERSIONED_TAG = re.compile(
    rf"^(?P<variant>[a-z0-9][a-z0-9-]*?)(-vllm[0-9][0-9A-Za-z.+_]*)?-cu[0-9][0-9.]*-(?P<revision>{REVISION_PATTERN})$")


class VariantLike(Protocol):
    """What a template needs of a variant (prebake.variants.Variant has it)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def gpus(self) -> tuple[str, ...]: ...
    @property
    def launch_defaults(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class TemplateOptions:
    """Choices of the person publishing; the defaults are documented in docs/publishing.md."""

    name: str | None = None
    volume_gb: int = DEFAULT_VOLUME_GB
    headroom_gb: int = CACHE_HEADROOM_GB
    registry_auth_id: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)


def check_image_ref(image: str, variant: str) -> None:
    """Refuse any image reference RunPod could resolve to different bytes later.

    RunPod caches images by tag on its hosts: a pod started from a moving tag (`latest`, `a40`) may run
    whatever that host pulled last time. Only a versioned tag (one build) or a digest is accepted.
    """
    problem = reference_problem(image)
    if problem:
        raise PrebakeError(f"image '{image}' is not an image reference: {problem}")
    if _DIGEST.search(image):
        return
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        raise PrebakeError(f"image '{image}' has no tag, so RunPod would pull ':latest', which moves and is "
                           f"cached by tag; give a versioned tag like <registry>/prebake:{variant}-vllm<ver>-cu<cuda>-<rev> "
                           "(`./build.py --variant ... --push` prints them)")
    tag = last.rsplit(":", 1)[1]
    if tag.endswith("-dirty"):
        raise PrebakeError(f"image '{image}' was built from a working tree with uncommitted changes, so its tag "
                           "does not say what is inside; publish a build of a commit (CI's, or a clean checkout)")
    match = _VERSIONED_TAG.match(tag)
    if tag == "latest" or not match or revision_problem(match["revision"]):
        raise PrebakeError(f"image '{image}': tag '{tag}' is not a versioned tag; RunPod caches images by tag, so a "
                           f"moving tag ('latest', '{variant}', '{variant}-vllm<ver>-cu<cuda>') can start a stale "
                           f"image. Use the tag with the source revision: {variant}-vllm<ver>-cu<cuda>-<rev>, "
                           "or a digest reference (image@sha256:...)")
    revision = match["revision"]
    if pushed_revision(revision) != revision:
        short = pushed_revision(revision)
        raise PrebakeError(f"image '{image}': no build pushes the revision '{revision}': a build shortens a full "
                           f"commit hash to its first 12 hex digits (as git rev-parse --short=12 prints it), so "
                           f"the tag is ...-{short}; use {image[:-len(revision)]}{short}, or the digest reference "
                           "the push printed")
    if match["variant"] != variant:
        raise PrebakeError(f"image '{image}' is a build of variant '{match['variant']}', not '{variant}'; "
                           f"pass --variant {match['variant']} or an image tagged {variant}-...")


def _registry_host(image: str) -> str | None:
    """The registry host[:port] the reference names, or None when it names none (Docker Hub is then implied)."""
    name = image.partition("@")[0]
    first, slash, _ = name.partition("/")
    return first if slash and ("." in first or ":" in first or first == "localhost") else None


def check_registry(image: str, variant: str) -> None:
    """Refuse a local name (no `/`): what `./build.py` tags without --registry, which no registry serves."""
    if "/" not in image.partition("@")[0]:
        raise PrebakeError(f"image '{image}' names no registry: it is a local name (what ./build.py tags without "
                           "--registry), and a RunPod host would look for it on Docker Hub as docker.io/library/"
                           f"{image.partition('@')[0].partition(':')[0]}, where it is not. Push it "
                           f"(./build.py --variant {variant} --registry ghcr.io/<owner> --push) and give the reference "
                           "the push printed, like ghcr.io/<owner>/prebake:<tag>")


# A build of the offline flavour (images/offline: image_name "prebake-offline") is made --without cuda-compat.
OFFLINE_IMAGE_NAME = "prebake-offline"
DRIVERS = ("CUDA 13.0 needs a host driver 580 or newer. The production images carry CUDA 13's forward-compatibility "
           "libraries, which the launcher enables on data-centre and professional GPUs (A40, A6000, L40S, H100...) "
           "with an older driver (550, 570); an image built --without cuda-compat has none, so it starts only on a "
           "driver 580 or newer (it exits 3 on an older one): when you deploy, pick a host whose CUDA version is "
           "13.0 or newer (RunPod's GPU filters list hosts by CUDA version).")


def image_warnings(image: str) -> list[str]:
    """What `runpod template` says about an image reference it accepts: a registry RunPod cannot reach or that the
    reference leaves implied, and an image known to be built without cuda-compat."""
    warnings = []
    host = _registry_host(image)
    if host is None:
        warnings.append(f"image '{image}' names no registry host: RunPod pulls it from Docker Hub "
                        f"(docker.io/{image}); if it is on another registry, write its host first "
                        "(ghcr.io/<owner>/...), as the push printed it")
    elif is_loopback_host(host.rpartition(":")[0] if host.count(":") == 1 else host):
        warnings.append(f"image '{image}' is on a registry of this machine ({host}): RunPod's hosts cannot reach "
                        "it. Push it to a registry they reach (ghcr.io, Docker Hub) and give that reference")
    repository = image.partition("@")[0].rpartition("/")[2].partition(":")[0]
    if repository == OFFLINE_IMAGE_NAME:
        warnings.append(f"image '{image}' is the offline flavour, built --without cuda-compat (README, \"Without "
                        f"registry access\"): {DRIVERS}")
    return warnings


CONSOLE_FIELDS = (  # RunPod console, Templates > New Template: its label, then what goes there
    ("Template Name", lambda p: p["name"]),
    ("Template Type", lambda p: "Pod"),
    ("Compute Type", lambda p: "Nvidia GPU"),
    ("Container Image", lambda p: p["image"]),
    ("Container Registry Credentials", lambda p: f"the credential whose id is {p['registry']}"
     if p.get("registry") else "none (a public image; a private one needs a credential)"),
    ("Container Start Command", lambda p: "leave empty: the image's own entrypoint starts the launcher"),
    ("Container Disk", lambda p: f"{p['disk']} GB"),
    ("Volume Disk", lambda p: f"{p['mounts']['persistent']['size']} GB"),
    ("Volume Mount Path", lambda p: p["mounts"]["persistent"]["path"]),
    ("Expose HTTP Ports", lambda p: ",".join(port.split("/")[0] for port in p["ports"] if port.endswith("/http"))),
    ("Expose TCP Ports", lambda p: "leave empty"),
)


def console_form(payload: Mapping[str, Any]) -> str:
    """The same template for a person filling in RunPod's console, field by field."""
    width = max(len(label) for label, _ in CONSOLE_FIELDS) + 1
    lines = ["In RunPod's console (Templates > New Template), the same template field by field; or create it from "
             "the JSON body above with `./build.py runpod publish` (same options, RUNPOD_API_KEY set):"]
    lines += [f"  {label + ':':<{width}} {value(payload)}" for label, value in CONSOLE_FIELDS]
    lines.append(f"  {'Environment Variables:':<{width}} one row each, key then value:")
    lines += [f"      {key} = {value}" for key, value in payload["env"].items()]
    lines.append(f"  Drivers: {DRIVERS}")
    return "\n".join(lines)


def container_disk_gb(image_size_bytes: int, headroom_gb: int = CACHE_HEADROOM_GB) -> int:
    """The image's unpacked size in GB (10**9 bytes, rounded up) plus the room for run-time caches."""
    if image_size_bytes <= 0:
        raise PrebakeError(f"image size must be positive, got {image_size_bytes} bytes")
    return math.ceil(image_size_bytes / 10**9) + headroom_gb


def cache_env(mount: str = VOLUME_MOUNT_PATH) -> dict[str, str]:
    """Caches that must survive a pod restart live on the volume: the weights and vLLM's compile cache."""
    return {"HF_HOME": f"{mount}/huggingface", "VLLM_CACHE_ROOT": f"{mount}/vllm"}


def default_name(variant: str, image: str) -> str:
    """`prebake-<versioned tag>`, or `prebake-<variant>-<digest prefix>`: RunPod wants template names unique."""
    digest = _DIGEST.search(image)
    if digest:
        return f"prebake-{variant}-{digest.group()[8:20]}"
    return f"prebake-{image.rsplit(':', 1)[1]}"


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SECRET_NAME = re.compile(r"[A-Za-z0-9_-]+")
SECRET_VALUE = re.compile(r"\{\{ ?RUNPOD_SECRET_[A-Za-z0-9_-]+ ?\}\}")


def secret_reference(name: str) -> str:
    """The template value RunPod replaces with the secret's content when the pod starts."""
    return f"{{{{ RUNPOD_SECRET_{name} }}}}"


def _access(port: str, keyed: bool) -> list[str]:
    url = f"https://<pod id>-{port}.proxy.runpod.net"
    if not keyed:
        return ["", "**No API key is set: anyone with the pod's URL can use it.** Publish the template with "
                    "`--api-key-secret NAME` (a RunPod secret), or set VLLM_API_KEY, to require one."]
    return [
        "",
        "Every request but `/health` needs the API key (VLLM_API_KEY, from a RunPod secret), sent as",
        "`Authorization: Bearer <key>` or `x-api-key: <key>`. Point the clients at the pod:",
        "",
        f"- Claude Code: open {url} in a browser (RunPod's Connect, HTTP {port}): the page shows the pod's",
        "  phase, its model and context, and the shell block that points Claude Code at it (for bash or zsh; in",
        "  fish, type `bash` first), with its model and context settings; it names VLLM_API_KEY, never holds the",
        "  key: set VLLM_API_KEY to the key in your shell, then paste it. The status page prints it too: `curl -H",
        f"  \"Authorization: Bearer $VLLM_API_KEY\" {url}/prebake/status.txt` (docs/quickstart.md, step 5)",
        f"- OpenAI SDK: `OpenAI(base_url=\"{url}/v1\", api_key=\"<key>\")`",
        f"- Anthropic SDK: `Anthropic(base_url=\"{url}\", api_key=\"<key>\")`",
        f"- curl: `curl -H 'Authorization: Bearer <key>' {url}/v1/models`",
    ]


def _readme(variant: VariantLike, image: str, port: str, keyed: bool = False) -> str:
    return "\n".join([
        f"# prebake {variant.name}",
        "",
        variant.description,
        "",
        f"- Image: `{image}` (everything baked in; nothing installs at start)",
        f"- GPUs: {', '.join(variant.gpus)}",
        f"- OpenAI and Anthropic APIs on port {port}: `https://<pod id>-{port}.proxy.runpod.net/v1`",
        f"- Weights and caches on the volume at `{VOLUME_MOUNT_PATH}`: a restarted pod does not download again",
        "- Settings: the VL_* environment variables (defaults of this variant are set here)",
        "",
        "RunPod's HTTP proxy cuts a request that receives nothing for about 100 s, and vLLM sends nothing",
        f"before the first token. The image's keep-alive bridge holds port {port} and, while vLLM is silent,",
        "sends a heartbeat the OpenAI and Anthropic SDKs skip, so prompts whose prefill takes minutes complete",
        "through the proxy (VL_BRIDGE=off turns it off; a TCP port on the pod's public IP stays an option).",
        *_access(port, keyed),
    ])


def _idle_readme(env: Mapping[str, str]) -> str:
    value = env.get(IDLE_STOP_ENV, "").strip()
    if not value or value.lower() in ("off", "0", "false", "no"):
        return ("\n\nIdle stop is off (VL_IDLE_STOP): the pod runs, and bills, until you stop it. Set VL_IDLE_STOP to "
                "a number of minutes to have an unused pod stop itself.")
    return (f"\n\nA pod that receives no request for {value} minutes (VL_IDLE_STOP; `off` turns it off) asks RunPod "
            "to stop it: the volume at /workspace (weights, compile caches) stays, the container disk is reset and "
            "the GPU is released. Start it again from the console's Pods page (Start); the GPU may have been "
            "rented meanwhile. The status page, /prebake/status, shows when it will stop.")


def build_template(variant: VariantLike, image: str, image_size_bytes: int,
                   options: TemplateOptions = TemplateOptions()) -> dict[str, Any]:
    """The body of POST /v2/templates (CreateTemplateRequest) for `variant` running `image`."""
    check_image_ref(image, variant.name)
    check_registry(image, variant.name)
    if options.volume_gb < MIN_VOLUME_GB:
        raise PrebakeError(f"volume size must be at least {MIN_VOLUME_GB} GB (RunPod's floor for a pod volume; the "
                           f"weights live there), got {options.volume_gb}")
    env = template_env(variant, options)
    payload: dict[str, Any] = {
        "name": options.name or default_name(variant.name, image),
        "image": image,
        "category": "NVIDIA",
        "disk": container_disk_gb(image_size_bytes, options.headroom_gb),
        "mounts": {"persistent": {"size": options.volume_gb, "path": VOLUME_MOUNT_PATH}},
        "ports": [f"{_port(env)}/http"],
        "env": env,
        "public": False,
        "serverless": False,
        # RunPod would add a JUPYTER_PASSWORD and a PUBLIC_KEY to the environment: the image runs neither.
        "startJupyter": False,
        "startSsh": False,
        # A registry credential's id for a private image; null for a public one, so that an update clears an old one
        # (v2's PATCH changes only the fields it is sent).
        "registry": options.registry_auth_id or None,
        # No `args`: the image's own ENTRYPOINT and CMD (tini, then the prebake launcher).
    }
    return payload


def template_env(variant: VariantLike, options: TemplateOptions = TemplateOptions()) -> dict[str, str]:
    env = {IDLE_STOP_ENV: DEFAULT_IDLE_STOP_MIN, **variant.launch_defaults, **cache_env(), **options.extra_env}
    return dict(sorted(env.items()))


def _port(env: Mapping[str, str]) -> str:
    return env.get("VL_PORT", DEFAULT_PORT)


def readme(variant: VariantLike, payload: Mapping[str, Any]) -> str:
    """What a template's readme said in v1, which v2's templates have no field for: how clients reach the pod."""
    env = payload["env"]
    return _readme(variant, payload["image"], _port(env), keyed=bool(env.get("VLLM_API_KEY"))) + _idle_readme(env)


def local_image_size(image: str) -> int | None:
    """The unpacked size in bytes of `image` if the local Docker Engine has it, else None."""
    import docker
    import docker.errors

    try:
        client = docker.from_env()
    except docker.errors.DockerException:
        return None
    try:
        return int(client.images.get(image).attrs["Size"])
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError:
        return None
    finally:
        client.close()


@dataclass(frozen=True)
class Api:
    """Where RunPod's REST API is and the key to call it with (never printed)."""

    key: str = field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    timeout_s: float = 30.0  # the whole request, connection to last byte

    def __post_init__(self) -> None:
        check_key(self.key)
        check_base_url(self.base_url)


def check_key(key: str) -> None:
    """Refuse a key that cannot go in an HTTP header, without ever showing it."""
    for position, char in enumerate(key, 1):
        if not "\x21" <= char <= "\x7e":
            what = "a line break" if char in "\r\n" else "white space" if char.isspace() else "a non-ASCII character" \
                if ord(char) > 0x7e else "a control character"
            raise PrebakeError(f"{API_KEY_ENV} holds {what} at character {position} of {len(key)}, which cannot go "
                               "in an HTTP header; copy the key again from RunPod's console (Settings > API Keys)")


base_url_problem = runpod_base_url_problem  # the launcher's rule for the same URL (entrypoint/contract.py)


def check_base_url(url: str, source: str = "the RunPod API URL") -> None:
    problem = base_url_problem(url)
    if problem:
        raise PrebakeError(f"{source} '{url}': {problem}")


def api_from_env(base_url: str | None = None, env: Mapping[str, str] = os.environ) -> Api:
    key = env.get(API_KEY_ENV, "").strip()
    if not key:
        raise PrebakeError(f"{API_KEY_ENV} is not set; create an API key with access to templates in RunPod's "
                           f"console (Settings > API Keys) and export {API_KEY_ENV}=... before publishing")
    check_key(key)
    url = base_url or env.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    check_base_url(url, "--base-url" if base_url else f"${BASE_URL_ENV}" if env.get(BASE_URL_ENV) else "the default")
    return Api(key=key, base_url=url.rstrip("/"))


MAX_RESPONSE_BYTES = 4 * 2**20


def _exchange(api: Api, method: str, url: str, body: bytes | None) -> tuple[int, Any, bytes]:
    """One HTTP exchange, never following a redirect (http.client does not), all of it within api.timeout_s."""
    parts = urllib.parse.urlsplit(url)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.hostname, parts.port, timeout=api.timeout_s)
    late = threading.Event()

    def cut() -> None:  # a server that trickles bytes never trips a per-read timeout: close under it
        late.set()
        sock = connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(api.timeout_s, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Authorization": f"Bearer {api.key}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        raw = response.read(MAX_RESPONSE_BYTES + 1)
        if late.is_set():
            raise TimeoutError
        return response.status, response.headers, raw
    except (OSError, http.client.HTTPException):
        if late.is_set():
            raise TimeoutError(f"no complete answer within {api.timeout_s:g} s") from None
        raise
    finally:
        watchdog.cancel()
        connection.close()


# A 429's Retry-After is waited out this many times, each wait at most MAX_WAIT_S; a longer one is reported.
RATE_LIMIT_RETRIES, MAX_WAIT_S = 3, 60


def _request(api: Api, method: str, path: str, body: Mapping[str, Any] | None = None,
             sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    url = f"{api.base_url}{path}"
    for attempt in range(RATE_LIMIT_RETRIES + 1):
        status, headers, raw = _send(api, method, url, body)
        wait = runpodapi.retry_after_s(headers.get("Retry-After")) if status == 429 else None
        if wait is None or attempt == RATE_LIMIT_RETRIES or wait > MAX_WAIT_S:
            break
        print(f"RunPod rate-limits {method} {url} (HTTP 429): waiting {wait} s as its Retry-After says, then "
              "asking again", file=sys.stderr)
        sleep(wait)
    if 300 <= status < 400:
        raise PrebakeError(f"RunPod answered {method} {url} with HTTP {status}, a redirect to "
                           f"{headers.get('Location', '(no Location)')!r}; it is not followed (the API key would go "
                           f"with it and a POST would become a GET). Check --base-url / {BASE_URL_ENV}")
    if status >= 400 or status < 200:
        message = runpodapi.problem_text(raw, redact=_redactor(api))
        hint = {401: f"; check {API_KEY_ENV}", 403: "; the API key lacks write access to templates",
                404: "; check the template id", 422: "; nothing was changed: the field RunPod refused is named above",
                429: f"; try again in {wait} s (Retry-After)" if wait is not None else "; try again later"
                }.get(status, "")
        raise PrebakeError(f"RunPod refused {method} {url}: HTTP {status}: {message}{hint}")
    if len(raw) > MAX_RESPONSE_BYTES:
        raise PrebakeError(f"RunPod answered {method} {url} with more than {MAX_RESPONSE_BYTES} bytes")
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise PrebakeError(f"RunPod answered {method} {url} with something that is not JSON: "
                           f"{_shown(api, raw)}") from None
    if not isinstance(data, dict):
        raise PrebakeError(f"RunPod answered {method} {url} with JSON that is not an object: {_shown(api, raw)} (a v1 "
                           f"list? check --base-url / {BASE_URL_ENV}: v2's base is {DEFAULT_BASE_URL})")
    return data


def _send(api: Api, method: str, url: str, body: Mapping[str, Any] | None) -> tuple[int, Any, bytes]:
    try:
        return _exchange(api, method, url, None if body is None else json.dumps(body).encode())
    except TimeoutError as late:
        raise PrebakeError(f"RunPod did not answer {method} {url} within {api.timeout_s:g} s "
                           f"({str(late) or 'timed out'}); try again later, or check {BASE_URL_ENV}") from None
    except (OSError, http.client.HTTPException, ValueError) as failed:
        reason = safe(failed, 300, _redactor(api)) or failed.__class__.__name__
        raise PrebakeError(f"could not reach RunPod at {url}: {reason}; check the network or "
                           f"{BASE_URL_ENV}") from None


def _redactor(api: Api) -> Callable[[str], str]:
    """The key masked wherever RunPod's answer echoes it, whole or cut (redact.py)."""
    return lambda text: mask_values(text, (api.key,))


def _shown(api: Api, raw: bytes | str) -> str:
    """An answer of RunPod's in an error line: redacted, escaped and cut (safetext.safe)."""
    return repr(safe(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw, 200, _redactor(api)))


def _template(api: Api, method: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    data = _request(api, method, path, body)
    if not data.get("id"):
        raise PrebakeError(f"RunPod answered {method} {api.base_url}{path} with JSON that is not a template (no "
                           f"'id'): {_shown(api, json.dumps(data))}")
    return data


def list_templates(api: Api) -> list[dict[str, Any]]:
    """GET /v2/templates: the account's templates (v2 wraps the list: {"templates": [...]})."""
    data = _request(api, "GET", runpodapi.TEMPLATES_PATH)
    found = data.get(runpodapi.TEMPLATES_LIST_KEY)
    if not isinstance(found, list) or not all(isinstance(item, dict) for item in found):
        raise PrebakeError(f"RunPod answered GET {api.base_url}{runpodapi.TEMPLATES_PATH} without a list of "
                           f"templates under '{runpodapi.TEMPLATES_LIST_KEY}': {_shown(api, json.dumps(data))}")
    return found


def create_template(api: Api, payload: Mapping[str, Any]) -> dict[str, Any]:
    """POST /v2/templates; returns RunPod's template, `id` included."""
    return _template(api, "POST", runpodapi.TEMPLATES_PATH, payload)


def update_template(api: Api, template_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """PATCH /v2/templates/{template_id}: v2's update takes every field of the create, and changes those sent."""
    if not runpodapi.ID.fullmatch(template_id):
        raise PrebakeError(f"template id '{template_id}' is not a RunPod id (letters, digits, '-' and '_')")
    return _template(api, "PATCH", runpodapi.template_path(template_id), payload)


def publish(api: Api, payload: Mapping[str, Any], template_id: str | None = None) -> tuple[str, dict[str, Any]]:
    """Update `template_id` when given; else the account's template of the same name, found by listing them; else
    create one. One write: a refused one leaves the account as it was. Returns what was done and RunPod's
    template."""
    if template_id:
        return "updated", update_template(api, template_id, payload)
    same = [t for t in list_templates(api) if t.get("name") == payload["name"]]
    if len(same) > 1:
        raise PrebakeError(f"{len(same)} templates of this account are named '{payload['name']}' (ids "
                           f"{', '.join(safe(t.get('id'), 64) for t in same)}): pass --template-id to say which to update")
    if same:
        return "updated (found by name)", update_template(api, str(same[0].get("id", "")), payload)
    return "created", create_template(api, payload)
