"""What an image is called: versioned tags that say what is inside, moving tags that follow them."""

import re
import subprocess
from dataclasses import dataclass

from prebake.errors import PrebakeError
from prebake.variants import REPO_ROOT

_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# What --revision may be: the last '-'-separated part of a versioned tag, so no '-' in it (runpod.py reads tags
# back with this pattern). A full git hash is shortened to 12 digits; any other revision is used whole, so that
# two revisions never share a tag.
REVISION_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._]{0,63}"
_REVISION = re.compile(rf"^{REVISION_PATTERN}$")
_FULL_HASH = re.compile(r"^[0-9a-f]{40}$")


def revision_problem(revision: str) -> str | None:
    """Why `revision` cannot name a versioned tag, or None."""
    if not _REVISION.match(revision):
        return ("a revision is 1 to 64 letters, digits, '.' or '_' (no '-', no space, no '/'), "
                "like a git hash or release1")
    if revision.lower() in ("dirty", "latest"):
        return f"'{revision}' reads as a moving or modified build; name a real revision (a commit, a release)"
    return None


def pushed_revision(revision: str) -> str:
    """The revision a build puts in its tags for `revision`: a full git hash shortened to 12 digits, else as is."""
    return revision[:12] if _FULL_HASH.match(revision) else revision


@dataclass(frozen=True)
class Tags:
    repository: str  # "ghcr.io/owner/prebake", or "prebake" locally
    versioned: tuple[str, ...]  # never move once pushed
    moving: tuple[str, ...]  # re-pointed at each build, after every versioned tag is pushed

    def refs(self, tags: tuple[str, ...]) -> list[str]:
        return [f"{self.repository}:{tag}" for tag in tags]


def repository(image_name: str, registry: str | None) -> str:
    return f"{registry.rstrip('/')}/{image_name}" if registry else image_name


def image_tags(repo: str, variant: str, vllm: str | None, cuda: str, revision: str) -> Tags:
    content = f"{variant}-vllm{vllm}-cu{cuda}" if vllm else f"{variant}-cu{cuda}"
    versioned = (f"{content}-{revision}",)
    moving = (content, variant)
    for tag in versioned + moving:
        if not _TAG.match(tag):
            raise PrebakeError(f"'{tag}' is not a valid image tag (letters, digits, '_', '.', '-'; at most 128); "
                               "check the variant name and --revision")
    return Tags(repository=repo, versioned=versioned, moving=moving)


@dataclass(frozen=True)
class Revision:
    full: str  # for the OCI revision label
    short: str  # for tags
    dirty: bool


def source_revision(override: str | None = None) -> Revision:
    """The git revision of the checkout ('-dirty' when tracked files changed), or the override."""
    if override:
        problem = revision_problem(override)
        if problem:
            raise PrebakeError(f"--revision {override!r}: {problem}")
        return Revision(full=override, short=pushed_revision(override), dirty=False)

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return Revision(full="unknown", short="unknown", dirty=True)
    dirty = git("diff", "--quiet", "HEAD", "--").returncode != 0
    full = head.stdout.strip()
    suffix = "-dirty" if dirty else ""
    return Revision(full=full + suffix, short=full[:12] + suffix, dirty=dirty)
