"""Tag and push: versioned tags first, moving tags only once every versioned one is in the registry.

A versioned tag never moves: before pushing one, the registry is asked for it. Absent, it is pushed; present
with this image's digest, nothing is pushed again; present with another digest, the push is refused.
"""

import contextlib
import os
import sys
from typing import Iterator, TextIO

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from prebake import pushing, skopeo
from prebake.errors import PrebakeError
from prebake.tags import Tags

USER_VARIABLE, PASSWORD_VARIABLE = pushing.USER_VARIABLE, pushing.PASSWORD_VARIABLE
TIMEOUT_VARIABLE, DEFAULT_PUSH_TIMEOUT_S = pushing.TIMEOUT_VARIABLE, pushing.DEFAULT_PUSH_TIMEOUT_S
push_timeout_s = pushing.push_timeout_s
LOOKUP_TIMEOUT_S = 60.0
# What the SDK lets through when the Engine goes silent past the timeout (streamed answers skip requests' wrapping).
_SILENCE = (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, TimeoutError)
_redact, _advice = pushing.redact, pushing.advice


def registry_auth() -> dict[str, str] | None:
    """Credentials from the environment, or None to let the SDK use the Docker config (docker login)."""
    user, password = os.environ.get(USER_VARIABLE), os.environ.get(PASSWORD_VARIABLE)
    if bool(user) != bool(password):
        missing = PASSWORD_VARIABLE if user else USER_VARIABLE
        raise PrebakeError(f"{missing} is not set but {USER_VARIABLE if user else PASSWORD_VARIABLE} is: set both, "
                           "or neither (then the Docker config's credentials are used, from `docker login`)")
    return {"username": user, "password": password} if user and password else None


@contextlib.contextmanager
def _timeout(client: docker.DockerClient, seconds: float) -> Iterator[None]:
    """The SDK's timeout is per read of the Engine's answer: bounded silence, however long the whole push takes."""
    before = client.api.timeout
    client.api.timeout = seconds
    try:
        yield
    finally:
        client.api.timeout = before


def _split(ref: str) -> tuple[str, str]:
    repository, _, tag_name = ref.rpartition(":")
    return repository, tag_name


def tag(client: docker.DockerClient, image_id: str, refs: list[str]) -> None:
    image = client.images.get(image_id)
    for ref in refs:
        image.tag(*_split(ref))


def remote_digest(client: docker.DockerClient, ref: str, auth: dict[str, str] | None) -> str | None:
    """The digest `ref` has in its registry now, or None when the registry has no such tag."""
    try:
        with _timeout(client, LOOKUP_TIMEOUT_S):
            data = client.api.inspect_distribution(ref, auth_config=auth)
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as e:
        raise PrebakeError(f"cannot ask the registry whether {ref} exists: {_redact(str(e.explanation or e), auth)}; "
                           "a versioned tag is only pushed where it does not exist yet. "
                           + _advice(str(e.explanation or e))) from None
    except _SILENCE:
        raise PrebakeError(f"the registry did not say within {LOOKUP_TIMEOUT_S:g} s whether {ref} exists; "
                           "check that it is up, then run again") from None
    return data["Descriptor"]["digest"]


def push_ref(client: docker.DockerClient, ref: str, auth: dict[str, str] | None, out: TextIO = sys.stderr) -> str:
    """Push one reference; return the digest the registry gave it."""
    repository, tag_name = _split(ref)
    print(f"[push] {ref}", file=out, flush=True)
    digest = ""
    seconds = push_timeout_s()
    try:
        with _timeout(client, seconds):
            for chunk in client.api.push(repository, tag=tag_name, stream=True, decode=True, auth_config=auth):
                if "error" in chunk:
                    raise PrebakeError(pushing.refused_message(ref, _redact(chunk["error"], auth)))
                digest = chunk.get("aux", {}).get("Digest", digest)
    except docker.errors.APIError as e:
        raise PrebakeError(f"could not push {ref}: {_redact(str(e.explanation or e), auth)}") from None
    except _SILENCE:
        raise PrebakeError(pushing.hung_message(ref, seconds)) from None
    if not digest:
        raise PrebakeError(f"pushing {ref} ended without a digest from the registry; nothing was moved")
    return digest


def _push_one(client: docker.DockerClient, ref: str, auth: dict[str, str] | None, compression: str,
              pushed: dict[str, str]) -> str:
    """gzip: the engine pushes `ref`. zstd: skopeo pushes the image once from the engine, and every
    later ref of the same image is pointed at that manifest in the registry (`pushed`: ref -> digest)."""
    if compression == "gzip":
        return push_ref(client, ref, auth)
    if pushed:
        first, digest = next(iter(pushed.items()))
        return skopeo.tag_in_registry(first, digest, ref, auth)
    return skopeo.push_from_engine(ref, ref, auth)


def push_refs(client: docker.DockerClient, refs: list[str], auth: dict[str, str] | None,
              compression: str = "gzip", pushed: dict[str, str] | None = None) -> dict[str, str]:
    """Push local `refs` (all one image) in order; return ref -> digest."""
    done: dict[str, str] = {}
    for ref in refs:
        done[ref] = _push_one(client, ref, auth, compression, {**(pushed or {}), **done})
    return done


def published_versions(client: docker.DockerClient, tags: Tags, auth: dict[str, str] | None) -> dict[str, str]:
    """The versioned references of `tags` that the registry already has, with their digests."""
    found = {ref: remote_digest(client, ref, auth) for ref in tags.refs(tags.versioned)}
    return {ref: digest for ref, digest in found.items() if digest}


def _local_digests(client: docker.DockerClient, image_id: str, ref: str) -> set[str]:
    repository = _split(ref)[0]
    digests = client.images.get(image_id).attrs.get("RepoDigests") or []
    return {d.partition("@")[2] for d in digests if d.partition("@")[0] == repository}


def never_moves_message(ref: str, digest: str) -> str:
    return (f"{ref} is already in the registry as {digest}: a versioned tag never moves (RunPod templates and "
            "deployments pin it). To publish a new build, give it a new revision: commit the change, or pass "
            "--revision <revision>.2 (letters, digits, '.', '_').")


def push_versioned(client: docker.DockerClient, image_id: str, ref: str, auth: dict[str, str] | None,
                   compression: str = "gzip", pushed: dict[str, str] | None = None) -> str:
    """Push a versioned reference that the registry does not have; a re-push of the same image pushes nothing."""
    pushed = pushed or {}
    remote = remote_digest(client, ref, auth)
    if remote is None:
        tag(client, image_id, [ref])
        return _push_one(client, ref, auth, compression, pushed)
    if remote in _local_digests(client, image_id, ref) or remote in pushed.values():
        tag(client, image_id, [ref])
        print(f"[push] {ref} is already in the registry as {remote}, this very image: nothing to push",
              file=sys.stderr, flush=True)
        return remote
    raise PrebakeError(never_moves_message(ref, remote) + " Nothing was pushed and no tag moved, here or there.")


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def _move(client: docker.DockerClient, image_id: str, ref: str, auth: dict[str, str] | None, push: bool,
          compression: str, pushed: dict[str, str]) -> str | None:
    """Point the moving `ref` at the image, locally then in the registry; a failed push puts the local tag back."""
    previous = _image_id(client, ref)
    tag(client, image_id, [ref])
    if not push:
        return None
    try:
        return _push_one(client, ref, auth, compression, pushed)
    except PrebakeError:
        if previous:
            tag(client, previous, [ref])
        else:
            client.api.remove_image(ref, noprune=True)
        raise


def tag_and_push(client: docker.DockerClient, image_id: str, tags: Tags, push: bool,
                 compression: str = "gzip") -> dict[str, str]:
    """Apply the tags (pushing them when asked) in an order that never leaves a moving tag ahead.

    Returns the pushed references with their digests. A failed push leaves the moving tags
    where they were, locally and in the registry.
    """
    auth = registry_auth() if push else None
    pushed = {}
    for ref in tags.refs(tags.versioned):
        if push:
            pushed[ref] = push_versioned(client, image_id, ref, auth, compression, pushed)
        else:
            tag(client, image_id, [ref])
    for ref in tags.refs(tags.moving):
        digest = _move(client, image_id, ref, auth, push, compression, pushed)
        if digest:
            pushed[ref] = digest
    return pushed
