"""Tag and push: versioned tags first, moving tags only once every versioned one is in the registry."""

import os
import sys
from typing import TextIO

import docker
import docker.errors

from prebake import skopeo
from prebake.errors import PrebakeError
from prebake.tags import Tags

USER_VARIABLE = "PREBAKE_REGISTRY_USER"
PASSWORD_VARIABLE = "PREBAKE_REGISTRY_PASSWORD"


def registry_auth() -> dict[str, str] | None:
    """Credentials from the environment, or None to let the SDK use the Docker config (docker login)."""
    user, password = os.environ.get(USER_VARIABLE), os.environ.get(PASSWORD_VARIABLE)
    if bool(user) != bool(password):
        raise PrebakeError(f"set both {USER_VARIABLE} and {PASSWORD_VARIABLE}, or neither "
                           "(then the Docker config's credentials are used)")
    return {"username": user, "password": password} if user and password else None


def _redact(text: str, auth: dict[str, str] | None) -> str:
    if auth and auth.get("password"):
        text = text.replace(auth["password"], "***")
    return text


def tag(client: docker.DockerClient, image_id: str, refs: list[str]) -> None:
    image = client.images.get(image_id)
    for ref in refs:
        repository, _, tag_name = ref.rpartition(":")
        image.tag(repository, tag_name)


def push_ref(client: docker.DockerClient, ref: str, auth: dict[str, str] | None, out: TextIO = sys.stderr) -> str:
    """Push one reference; return the digest the registry gave it."""
    repository, _, tag_name = ref.rpartition(":")
    print(f"[push] {ref}", file=out, flush=True)
    digest = ""
    try:
        for chunk in client.api.push(repository, tag=tag_name, stream=True, decode=True, auth_config=auth):
            if "error" in chunk:
                raise PrebakeError(f"the registry refused {ref}: {_redact(chunk['error'], auth)}. "
                                   f"Check the registry name and its credentials ({USER_VARIABLE}/"
                                   f"{PASSWORD_VARIABLE}, or `docker login`).")
            digest = chunk.get("aux", {}).get("Digest", digest)
    except docker.errors.APIError as e:
        raise PrebakeError(f"could not push {ref}: {_redact(str(e.explanation or e), auth)}") from None
    if not digest:
        raise PrebakeError(f"pushing {ref} ended without a digest from the registry; nothing was moved")
    return digest


def push_refs(client: docker.DockerClient, refs: list[str], auth: dict[str, str] | None,
              compression: str = "gzip", pushed: dict[str, str] | None = None) -> dict[str, str]:
    """Push local `refs` (all one image) in order; return ref -> digest. gzip: the engine pushes
    each. zstd: skopeo pushes the image once from the engine (unless `pushed` holds a push of it
    already) and points every other ref at that manifest."""
    done: dict[str, str] = {}
    for ref in refs:
        if compression == "gzip":
            done[ref] = push_ref(client, ref, auth)
        elif not (pushed or done):
            done[ref] = skopeo.push_from_engine(ref, ref, auth)
        else:
            first, digest = next(iter((pushed or done).items()))
            done[ref] = skopeo.tag_in_registry(first, digest, ref, auth)
    return done


def tag_and_push(client: docker.DockerClient, image_id: str, tags: Tags, push: bool,
                 compression: str = "gzip") -> dict[str, str]:
    """Apply the tags (pushing them when asked) in an order that never leaves a moving tag ahead.

    Returns the pushed references with their digests. A failed push leaves the moving tags
    where they were, locally and in the registry.
    """
    auth = registry_auth() if push else None
    versioned = tags.refs(tags.versioned)
    tag(client, image_id, versioned)
    pushed = {}
    if push:
        pushed.update(push_refs(client, versioned, auth, compression))
    moving = tags.refs(tags.moving)
    tag(client, image_id, moving)
    if push:
        pushed.update(push_refs(client, moving, auth, compression, pushed))
    return pushed
