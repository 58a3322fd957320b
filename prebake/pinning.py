"""Re-pin the stacks' base images to the digest a registry serves now (where one is reachable)."""

import re
from pathlib import Path

import docker
import docker.errors

from prebake.errors import PrebakeError

_BASE_LINE = re.compile(r'^(?P<indent>\s*base\s*=\s*")(?P<name>[^"@]+)@(?P<digest>sha256:[0-9a-f]{64})(?P<rest>".*)$',
                        re.MULTILINE)


def current_digest(client: docker.DockerClient, name: str) -> str:
    """The digest `name` (repository:tag) resolves to in its registry now."""
    try:
        data = client.images.get_registry_data(name)
    except docker.errors.APIError as e:
        raise PrebakeError(f"cannot ask the registry for {name}: {e.explanation or e}. "
                           "Pinning needs a reachable registry; run it where one is.") from None
    return data.id


def repin_file(client: docker.DockerClient, path: Path) -> list[tuple[str, str, str]]:
    """Rewrite every `base = "name@sha256:..."` line of `path`; return (name, old, new) for those that moved."""
    text = path.read_text()
    changes = []

    def replace(match: re.Match) -> str:
        new = current_digest(client, match["name"])
        if new != match["digest"]:
            changes.append((match["name"], match["digest"], new))
        return f"{match['indent']}{match['name']}@{new}{match['rest']}"

    updated = _BASE_LINE.sub(replace, text)
    if updated != text:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(updated)
        tmp.replace(path)
    return changes
