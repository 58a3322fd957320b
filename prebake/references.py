"""Image references and registry names, checked before anything is built (Docker's own grammar).

The grammar is distribution/reference's (what `docker tag` and `docker push` accept):
    reference  := name [":" tag] ["@" digest]
    name       := [domain "/"] component ("/" component)*
    domain     := host [":" port]      (the first part, when it holds "." or ":" or is "localhost")
    component  := [a-z0-9]+ (("." | "_" | "__" | "-"+) [a-z0-9]+)*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
Docker reports a bad one only when it is used (after a build, for --registry); these checks run first.
"""

from __future__ import annotations

import ipaddress
import re

_HOST_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = re.compile(rf"^(?:{_HOST_PART}(?:\.{_HOST_PART})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")
MAX_NAME = 255
# The algorithms the registries and Docker verify (opencontainers/go-digest), with their hex lengths.
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}


def _looks_like_domain(first: str) -> bool:
    return "." in first or ":" in first or first == "localhost" or first != first.lower()


def _name_problem(name: str) -> str | None:
    if not name:
        return "the name is empty"
    if len(name) > MAX_NAME:
        return f"the name is longer than {MAX_NAME} characters"
    parts = name.split("/")
    if len(parts) > 1 and _looks_like_domain(parts[0]):
        if not _DOMAIN.match(parts[0]):
            return f"'{parts[0]}' is not a registry host[:port]"
        port = parts[0].rpartition("]")[2].rpartition(":")[2] if ":" in parts[0].rpartition("]")[2] else None
        if port is not None and not 1 <= int(port) <= 65535:
            return f"port {port} of '{parts[0]}' is out of range (1-65535)"
        parts = parts[1:]
    for part in parts:
        if not _COMPONENT.match(part):
            if part != part.lower():
                return (f"'{part}' has upper-case letters; repository names are lower-case, a registry owner "
                        f"included (GitHub's 'MyOrg' is ghcr.io/myorg): use '{part.lower()}'")
            return (f"'{part}' is not a repository name component (lower-case letters and digits, "
                    "separated by '.', '_', '__' or '-')")
    return None


def reference_problem(ref: str) -> str | None:
    """Why `ref` is not an image reference Docker accepts, or None when it is one."""
    if not ref:
        return "it is empty"
    if any(c.isspace() for c in ref):
        return "an image reference holds no white space"
    name, at, digest = ref.partition("@")
    if at and not _DIGEST.match(digest):
        return f"'{digest}' is not a digest (algorithm:hex, like sha256:<64 hex digits>)"
    if at:
        algorithm, _, hex_digits = digest.partition(":")
        if algorithm not in DIGEST_HEX:
            return (f"digest algorithm '{algorithm}' is not one registries verify "
                    f"({', '.join(DIGEST_HEX)}); a digest is like sha256:<64 hex digits>")
        if len(hex_digits) != DIGEST_HEX[algorithm]:
            return f"a {algorithm} digest has {DIGEST_HEX[algorithm]} hex digits, this one {len(hex_digits)}"
    head, slash, last = name.rpartition("/")
    tag = ""
    if ":" in last:
        last, _, tag = last.partition(":")
        if not _TAG.match(tag):
            return f"tag '{tag}' is not a valid tag (letters, digits, '_', '.', '-'; at most 128)"
    return _name_problem(head + slash + last)


def registry_problem(registry: str) -> str | None:
    """Why `registry` (a namespace like ghcr.io/owner or 127.0.0.1:5000) cannot prefix image names, or None."""
    if not registry:
        return "it is empty"
    if any(c.isspace() for c in registry):
        return "a registry name holds no white space"
    if "@" in registry or (":" in registry.rsplit("/", 1)[-1] and "/" in registry):
        return "it must be a registry host and namespace without a tag or digest, like ghcr.io/owner"
    return _name_problem(registry.rstrip("/") + "/x")


def is_loopback_host(host: str | None) -> bool:
    """localhost or a loopback address (brackets of an IPv6 literal allowed): the only hosts prebake
    talks to in plain HTTP, as the Docker Engine does for registries."""
    name = (host or "").strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
