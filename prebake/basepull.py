"""The stack's base image, pulled before the build so that a machine without registry access is told what to do.

Without this, Docker's classic builder fails at FROM with a message about DNS or TLS that says
nothing about the way out: the offline flavour on a base made locally (README, "Without
registry access").
"""

import sys

import docker
import docker.errors
import requests.exceptions

from prebake.errors import PrebakeError

LOCAL_BASE = "prebake-local-base:bookworm"  # what `./build.py local-base` makes


def way_out(variant: str) -> str:
    return (f"without registry access, make a base here and build the offline flavour (README, \"Without registry "
            f"access\"): `./build.py local-base`, then `./build.py --images-dir images/offline --variant {variant} "
            f"--base {LOCAL_BASE} --without cuda-compat` (add --extra-ca CA.pem behind a TLS-intercepting proxy)")


def _reason(error: Exception) -> str:
    text = str(getattr(error, "explanation", None) or error)
    return " ".join(text.split())[:300]


def ensure_base(client: docker.DockerClient, ref: str, variant: str) -> None:
    """Pull `ref` unless the engine has it; a pull that fails is one line naming the base, the reason and the way out."""
    try:
        client.images.get(ref)
        return
    except docker.errors.ImageNotFound:
        pass
    print(f"[stack] pulling the base image {ref}", file=sys.stderr, flush=True)
    try:
        client.images.pull(ref)
    except (docker.errors.APIError, requests.exceptions.RequestException) as e:
        raise PrebakeError(f"cannot pull the base image {ref} ({_reason(e)}); {way_out(variant)}") from None
