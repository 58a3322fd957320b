"""`./build.py runpod template --variant router`: the RunPod template of the router pod (docs/router.md).

The body is runpod.build_template's (so it follows RunPod's API as that module does), with what differs for a CPU
pod that serves no model: category CPU, a small volume (the pod list a `reload` re-reads), the router's own
variables instead of the launcher's; and the readme for the team, printed apart (v2 has no field for it)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from prebake import runpod
from prebake.errors import PrebakeError
from routerpod import router

VARIANT = "router"
VOLUME_GB = runpod.MIN_VOLUME_GB  # RunPod's floor for a pod volume; the router keeps only its pod list there
# The launcher's variables mean nothing to the router pod; a template that sets them is a mix-up.
_LAUNCHER_ONLY = re.compile(r"^(VL_(?!PORT$)\w+|HF_HOME|VLLM_CACHE_ROOT)$")


@dataclass(frozen=True)
class RouterVariant:
    """A VariantLike for runpod.build_template."""

    name: str = VARIANT
    description: str = "nginx in front of N prebake pods, each Claude Code session kept on one pod"
    gpus: tuple[str, ...] = ()
    launch_defaults: Mapping[str, str] = field(default_factory=lambda: {router.PORT_ENV: router.DEFAULTS[router.PORT_ENV]})


def check_image(image: str) -> None:
    """A digest reference only: RunPod caches images by tag, and the router image's tags carry no revision."""
    runpod.check_registry(image, VARIANT)
    if "@sha256:" not in image:
        raise PrebakeError(f"image '{image}': give the router image by digest, REGISTRY/prebake-router@sha256:... (what "
                           "`docker push` prints last): RunPod caches images by tag, so a tag can start a stale router")


def _readme(port: str) -> str:
    url = f"https://<router pod id>-{port}.proxy.runpod.net"
    return "\n".join([
        "# prebake router",
        "",
        "nginx in front of your prebake pods: each Claude Code session (its X-Claude-Code-Session-Id) stays on one",
        "pod, whose prefix cache holds it; a pod that stops or is still loading gets no request, and its sessions",
        "move to the others. No GPU.",
        "",
        f"- {router.PODS_ENV}: the pods' URLs (https://<pod id>-8080.proxy.runpod.net), separated by spaces or commas",
        f"- {router.CLIENT_KEY_ENV}: the one key clients send to the router (a RunPod secret)",
        f"- {router.POD_KEY_ENV}: the key the pods have as their own VLLM_API_KEY; it never reaches a client",
        "",
        f"Claude Code: `ANTHROPIC_BASE_URL={url} ANTHROPIC_AUTH_TOKEN=\"$ROUTER_KEY\" claude`.",
        f"A new pod joins without a restart: add it to /workspace/prebake-pods.txt on this pod, then run",
        "`python3 /opt/prebake/router.py reload` in its terminal (or edit the variable: RunPod restarts this pod",
        "only). docs/router.md has the rest.",
    ])


def build_router_template(image: str, image_size_bytes: int, options: runpod.TemplateOptions) -> dict[str, Any]:
    check_image(image)
    for name in options.extra_env:
        if _LAUNCHER_ONLY.match(name):
            raise PrebakeError(f"--env {name}: a variable of the launcher on the GPU pods; the router pod reads "
                               f"{router.PODS_ENV}, {router.CLIENT_KEY_ENV}, {router.POD_KEY_ENV}, "
                               f"{router.FAIL_TIMEOUT_ENV} and {router.PORT_ENV} (docs/router.md)")
    env = {**RouterVariant().launch_defaults, **options.extra_env}
    try:  # what the router pod would refuse at its start, refused now (its own checks, on the template's values)
        if (env.get(router.PODS_ENV) or "").strip():
            router.parse_pods(env[router.PODS_ENV], f"--env {router.PODS_ENV}")
        else:
            raise router.RouterError(f"--env {router.PODS_ENV}=... is missing: the pods' URLs, "
                                     "https://<pod id>-8080.proxy.runpod.net, separated by spaces or commas")
        for name in (router.CLIENT_KEY_ENV, router.POD_KEY_ENV):
            value = env.get(name, "")
            if name == router.CLIENT_KEY_ENV and not value:
                raise router.RouterError(f"{name} is not set: pass --api-key-secret NAME (a RunPod secret), the key "
                                         "every client sends to the router")
            if value and not runpod.SECRET_VALUE.fullmatch(value):
                router._key(env, name, required=False)
    except router.RouterError as e:
        raise PrebakeError(f"{e} The router pod would refuse it at its start.") from None
    # Allowed fields and names come from build_template; everything the GPU pods need is taken out again.
    payload = runpod.build_template(RouterVariant(), image, image_size_bytes,
                                    runpod.TemplateOptions(name=options.name or runpod.default_name(VARIANT, image),
                                                           volume_gb=VOLUME_GB, headroom_gb=1,
                                                           registry_auth_id=options.registry_auth_id,
                                                           extra_env=env))
    for name in (runpod.IDLE_STOP_ENV, *runpod.cache_env()):
        payload["env"].pop(name, None)
    if "category" in payload:
        payload["category"] = "CPU"
    return payload


def readme(payload: Mapping[str, Any]) -> str:
    """How the team reaches the router: RunPod's v2 templates have no readme field, so it goes to stderr."""
    return _readme(payload["env"][router.PORT_ENV])


def console_form(payload: Mapping[str, Any]) -> str:
    """runpod.console_form's field-by-field text, for a CPU pod that runs the router (no GPU, no driver)."""
    lines = [line.replace("Nvidia GPU", "CPU").replace("starts the launcher", "starts the router")
             for line in runpod.console_form(payload).splitlines() if not line.lstrip().startswith("Drivers:")]
    return "\n".join(lines)
