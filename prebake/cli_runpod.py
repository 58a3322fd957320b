"""`./build.py runpod ...`: print or publish the RunPod pod template of a variant and a versioned image tag.

Errors are PrebakeError, which build.py's main turns into one `error: ...` line and exit status 1; a bad option
value is a usage error (exit status 2), found by the options' callbacks before anything else runs."""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Mapping, Optional

import typer

from entrypoint.contract import key_problem
from entrypoint.launcher import podcheck
from prebake import options as checks
from prebake import runpod
from entrypoint.safetext import safe
from prebake.errors import PrebakeError
from prebake.options import key_values
from prebake.variants import load_variants

runpod_app = typer.Typer(help="RunPod pod templates for prebake images (docs/publishing.md).",
                         no_args_is_help=True, add_completion=False)

VARIANT = typer.Option(..., "--variant", help="The variant the image was built for (./build.py list).")
IMAGE = typer.Option(..., "--image", callback=checks.image_reference,
                     help="A versioned tag, like ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-0123456789ab (a commit's "
                          "first 12 hex digits, as builds push it), or a digest reference; never 'latest' or "
                          "the short tag. The owner is lower-case.")
IMAGE_SIZE = typer.Option(None, "--image-size-gb", callback=checks.image_size_gb,
                          help="The image's unpacked size in GB, when the image is not in the local Docker Engine (the "
                               "build printed it as `size:`).")
VOLUME = typer.Option(runpod.DEFAULT_VOLUME_GB, "--volume-gb", min=runpod.MIN_VOLUME_GB,
                      help=f"The volume mounted at {runpod.VOLUME_MOUNT_PATH}: the weights and caches live there.")
HEADROOM = typer.Option(runpod.CACHE_HEADROOM_GB, "--headroom-gb", min=0,
                        help="Container disk added to the image size for run-time compile caches.")
NAME = typer.Option(None, "--name", callback=checks.printable,
                    help="Template name (unique in the account); default prebake-<tag>.")
AUTH = typer.Option(None, "--registry-auth-id", callback=checks.printable,
                    help="RunPod container registry credential id, for a private image.")
ENV = typer.Option([], "--env", help="Extra environment variable KEY=VALUE (repeatable), e.g. VL_MODEL=... ; "
                                     "for secrets use RunPod's {{ RUNPOD_SECRET_name }}.")
KEY_SECRET = typer.Option(None, "--api-key-secret", callback=lambda value: _secret_name(value),
                          help="The RunPod secret holding the pod's API key: the template sets VLLM_API_KEY to "
                               "{{ RUNPOD_SECRET_<name> }}, and every request but /health then needs the key.")

IDLE_STOP = typer.Option(None, "--idle-stop", callback=lambda value: _idle_stop(value),
                         help=f"Minutes without a request after which the pod asks RunPod to stop it (fractions "
                              f"allowed), or 'off'; default {runpod.DEFAULT_IDLE_STOP_MIN} (VL_IDLE_STOP, "
                              "docs/idle-stop.md).")


def _idle_stop(value: Optional[str]) -> Optional[str]:
    """The launcher's own parser for VL_IDLE_STOP, so the template holds only what a pod accepts."""
    if value is None:
        return None
    problem = podcheck.knob_problem(runpod.IDLE_STOP_ENV, value.strip())
    if problem:
        raise typer.BadParameter(f"{value!r}: {problem}")
    return value.strip()


def _secret_name(value: Optional[str]) -> Optional[str]:
    if value is not None and not runpod.SECRET_NAME.fullmatch(value):
        raise typer.BadParameter(f"{value!r}: a RunPod secret name is letters, digits, '_' and '-'")
    return value


def _base_url(value: Optional[str]) -> Optional[str]:
    problem = None if value is None else runpod.base_url_problem(value)
    if problem:
        raise typer.BadParameter(f"{value!r}: {problem}")
    return value


def _template_id(value: Optional[str]) -> Optional[str]:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", value):
        raise typer.BadParameter(f"{value!r}: not a RunPod id (letters, digits, '-' and '_')")
    return value


def check_launch_env(extra_env: Mapping[str, str], launch_defaults: Mapping[str, str],
                     template_env: Optional[Mapping[str, str]] = None, variant: Any = None) -> None:
    """Refuse what the launcher would refuse at every pod start, with the launcher's own checks (not a copy)
    on the template's full environment: each value, values against each other, the ports; with `variant`,
    VL_SWAP's pairs against the catalogue and the variant's GPUs (entrypoint/launcher/podcheck.py)."""
    for name in extra_env:
        if not runpod.ENV_NAME.fullmatch(name):
            raise PrebakeError(f"--env {name!r}: not an environment variable name (letters, digits and _, not "
                               "starting with a digit)")
    environment = {**(template_env or {}), **extra_env}
    gpu = None if variant is None else (variant.gpus[0], variant.cuda_arch)
    try:
        ignored = podcheck.check_pod_env(environment, launch_defaults, gpu)
    except podcheck.LaunchError as e:
        raise PrebakeError(f"--env: {e} The launcher would refuse it at every pod start.") from None
    key = extra_env.get("VLLM_API_KEY")
    problem = None if key is None else key_problem(key)
    if key is not None and (problem or key != key.strip()):
        raise PrebakeError(f"--env VLLM_API_KEY {problem or 'has whitespace around it (a pasted line break?)'}: "
                           "give the key alone, or better, --api-key-secret NAME.")
    if key and not runpod.SECRET_VALUE.fullmatch(key):
        print("warning: --env VLLM_API_KEY holds the key itself, readable by anyone who can read the template; "
              "store it as a RunPod secret and pass --api-key-secret NAME", file=sys.stderr)
    for variable in ignored:
        if variable.name not in extra_env:
            continue
        if variable.retired:
            print(f"warning: --env {variable.name}: ignored by the launcher ({variable.why})", file=sys.stderr)
        else:
            raise PrebakeError(f"--env {variable.name}: {variable.why} (docs/entrypoint.md lists the VL_* variables)")


def _parse_env(pairs: list[str], key_secret: Optional[str] = None) -> dict[str, str]:
    env = key_values(pairs, "--env")
    names = [pair.partition("=")[0] for pair in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise PrebakeError(f"--env {', '.join(repeated)} given more than once: give each variable once (the "
                           "template holds one value)")
    if key_secret:
        if "VLLM_API_KEY" in env:
            raise PrebakeError("--api-key-secret and --env VLLM_API_KEY=... both set the key: give one")
        env["VLLM_API_KEY"] = runpod.secret_reference(key_secret)
    return env


def _image_size(image: str, size_gb: Optional[float]) -> int:
    if size_gb is not None:
        return int(size_gb * 10**9)
    size = runpod.local_image_size(image)
    if size is None:
        raise PrebakeError(f"image '{image}' is not in the local Docker Engine (or no engine is running), so its "
                           "unpacked size, which sizes the container disk, is unknown. Pass --image-size-gb N: the "
                           "build that pushed it printed `size: N GB`; on a machine that has the image, "
                           "`docker image inspect -f '{{.Size}}' IMAGE` prints it in bytes; or `docker pull` it "
                           "here first. Rounding up is safe: the disk gets --headroom-gb on top")
    return size


def _payload(variant: str, image: str, size_gb: Optional[float], volume_gb: int, headroom_gb: int,
             name: Optional[str], auth: Optional[str], env: list[str],
             key_secret: Optional[str] = None, idle_stop: Optional[str] = None) -> tuple[Any, dict[str, Any]]:
    if variant == "router":  # the router pod (docs/router.md): a CPU pod, its own variables
        from prebake import routertemplate

        return None, routertemplate.build_router_template(image, _image_size(image, size_gb), runpod.TemplateOptions(
            name=name, registry_auth_id=auth, extra_env=_parse_env(env, key_secret)))
    variants = load_variants()
    if variant not in variants:
        raise PrebakeError(f"unknown variant '{variant}'; known variants: {', '.join(variants)} (./build.py list)")
    chosen = variants[variant]
    runpod.check_image_ref(image, chosen.name)  # refuse a moving tag before asking Docker anything
    runpod.check_registry(image, chosen.name)
    for warning in runpod.image_warnings(image):
        print(f"warning: {warning}", file=sys.stderr)
    extra_env = _parse_env(env, key_secret)
    if idle_stop is not None:
        if runpod.IDLE_STOP_ENV in extra_env:
            raise PrebakeError("--idle-stop and --env VL_IDLE_STOP=... both set the idle stop: give one")
        extra_env[runpod.IDLE_STOP_ENV] = idle_stop
    check_launch_env(extra_env, chosen.launch_defaults, {runpod.IDLE_STOP_ENV: runpod.DEFAULT_IDLE_STOP_MIN,
                                                         **chosen.launch_defaults, **runpod.cache_env()}, chosen)
    options = runpod.TemplateOptions(name=name, volume_gb=volume_gb, headroom_gb=headroom_gb,
                                     registry_auth_id=auth, extra_env=extra_env)
    return chosen, runpod.build_template(chosen, image, _image_size(image, size_gb), options)


@runpod_app.command("template")
def template(variant: str = VARIANT, image: str = IMAGE, image_size_gb: Optional[float] = IMAGE_SIZE,
             volume_gb: int = VOLUME, headroom_gb: int = HEADROOM, name: Optional[str] = NAME,
             registry_auth_id: Optional[str] = AUTH, env: list[str] = ENV,
             api_key_secret: Optional[str] = KEY_SECRET, idle_stop: Optional[str] = IDLE_STOP) -> None:
    """Print the template as the JSON body of RunPod's POST /v2/templates (stdout), and on stderr the same template
    as the fields of RunPod's console, and the readme that says how clients reach the pod."""
    chosen, payload = _payload(variant, image, image_size_gb, volume_gb, headroom_gb, name, registry_auth_id, env,
                               api_key_secret, idle_stop)
    typer.echo(json.dumps(payload, indent=2))
    if variant == "router":
        from prebake import routertemplate

        typer.echo(routertemplate.console_form(payload), err=True)
        typer.echo("\nHow clients reach the router (RunPod's v2 API has no readme field; paste it where you describe "
                   "the template, if you want it there):\n\n" + routertemplate.readme(payload), err=True)
        return
    typer.echo(runpod.console_form(payload), err=True)
    typer.echo("\nHow clients reach a pod of this template (RunPod's v2 API has no readme field; paste it where you "
               "describe the template, if you want it there):\n\n" + runpod.readme(chosen, payload), err=True)


@runpod_app.command("publish")
def publish(variant: str = VARIANT, image: str = IMAGE, image_size_gb: Optional[float] = IMAGE_SIZE,
            volume_gb: int = VOLUME, headroom_gb: int = HEADROOM, name: Optional[str] = NAME,
            registry_auth_id: Optional[str] = AUTH, env: list[str] = ENV,
            api_key_secret: Optional[str] = KEY_SECRET, idle_stop: Optional[str] = IDLE_STOP,
            template_id: Optional[str] = typer.Option(None, "--template-id", callback=_template_id,
                                                      help="Update this template instead of creating one."),
            base_url: Optional[str] = typer.Option(None, "--base-url", callback=_base_url,
                                                   help=f"RunPod REST API v2 base (default {runpod.DEFAULT_BASE_URL}, "
                                                        f"or ${runpod.BASE_URL_ENV}).")) -> None:
    """Create the template through RunPod's REST API v2 (API key from $RUNPOD_API_KEY); update --template-id, or the
    account's template of the same name."""
    _, payload = _payload(variant, image, image_size_gb, volume_gb, headroom_gb, name, registry_auth_id, env,
                          api_key_secret, idle_stop)
    verb, result = runpod.publish(runpod.api_from_env(base_url), payload, template_id)
    volume = payload["mounts"]["persistent"]
    typer.echo(f"{verb} RunPod template {safe(result.get('id', template_id), 64)} "
               f"'{safe(result.get('name', payload['name']), 200)}' "
               f"-> {payload['image']} (container disk {payload['disk']} GB, "
               f"volume {volume['size']} GB at {volume['path']}, ports {', '.join(payload['ports'])})")
