"""The Docker Engine the integration tests drive (tests/integration/): images made from others by copying files in,
and the tags a test session made, removed at its end (the engine is shared with the people who build images)."""

from __future__ import annotations

import io
import tarfile

import docker


def image_with_files(client: docker.DockerClient, base: str, files: dict[str, tuple[bytes, int]], tag: str) -> str:
    """`base` with each file (content, mode) copied to its absolute path; the new image's id."""
    dockerfile = f"FROM {base}\n" + "".join(f"COPY file{i} {path}\n" for i, path in enumerate(files))
    entries = [("Dockerfile", dockerfile.encode(), 0o644)]
    entries += [(f"file{i}", data, mode) for i, (data, mode) in enumerate(files.values())]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    image, _ = client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True)
    return image.id


# What the tests name, and only that: the image name of tests/fixtures/images, its stacks and the base pin-bases
# pushes when under a local registry the tests started (127.0.0.1:<port>/...), and the fixed names tests give.
TEST_REPOSITORY = "prebake-test"
LOCAL_REGISTRY_REPOSITORIES = (TEST_REPOSITORY, "prebake-stack", "prebake-kernels", "prebake-base")
TEST_TAGS = ("prebake-router:integration",)  # tests/integration/test_router_image.py


def made_by_the_tests(tag: str) -> bool:
    """Whether `tag` (repository:tag) is a name the tests give. The test base, the stacks built locally (the build's
    own cache: the next run's builds find them, "is already built") and the real a40 image are not among them."""
    repository = tag.rpartition(":")[0]
    host, _, name = repository.rpartition("/")
    if host.startswith("127.0.0.1:"):
        return name in LOCAL_REGISTRY_REPOSITORIES
    return repository == TEST_REPOSITORY or tag in TEST_TAGS


class SessionTags:
    """The tags a test session makes in a shared Docker Engine, so that it can remove them at its end.

    Taken at the session's start and compared at its end: a tag is removed only when the tests name it
    (made_by_the_tests) and it is new or points elsewhere than at the start; an image left untagged by that, or by a
    build re-pointing a tag it had at the start, goes too, and so does what a failed build left on the test base.
    Tags other people made are never touched, whatever their names, while they stay where they were.
    """

    def __init__(self, client: docker.DockerClient, base: str) -> None:
        self.client = client
        self.base = base  # the test base: an untagged image built on it is a test build's
        self.before = self.tags()
        self.dangling_before = self.dangling()

    def dangling(self) -> set[str]:
        return {image.id for image in self.client.images.list(filters={"dangling": True})}

    def failed_builds(self) -> set[str]:
        """The untagged images that appeared since the start on top of the test base: what a failed test build
        left (the classic builder keeps the last step that succeeded)."""
        try:
            base = self.client.images.get(self.base).id
        except docker.errors.ImageNotFound:
            return set()
        found = set()
        for image in self.dangling() - self.dangling_before:
            try:
                if any(layer["Id"] == base for layer in self.client.images.get(image).history()):
                    found.add(image)
            except docker.errors.ImageNotFound:
                pass
        return found

    def tags(self) -> dict[str, str]:
        return {tag: image.id for image in self.client.images.list() for tag in image.tags}

    def remove_made(self) -> list[str]:
        """Remove what the session made; the tags removed. Raises naming each tag or image that could not go."""
        now = self.tags()
        made = sorted(tag for tag, image in now.items() if made_by_the_tests(tag) and self.before.get(tag) != image)
        # images the session's tags (or its re-pointing of an earlier one) pointed at, which lose their last tag
        images = {now[tag] for tag in made} | {image for tag, image in self.before.items()
                                              if made_by_the_tests(tag) and now.get(tag) != image}
        images |= self.failed_builds()
        problems = []
        for tag in made:
            try:
                self.client.images.remove(tag)  # an untag where the image has other tags or children
            except docker.errors.ImageNotFound:
                pass
            except docker.errors.APIError as e:
                problems.append(f"{tag}: {e.explanation or e}")
        # an image built FROM another goes first: retry while any goes
        # (a child removed later in a pass frees its parent for the next pass: stop only after a pass freed nothing)
        pending, refused = set(images), {}
        while pending:
            before = len(pending)
            for image in sorted(pending):
                try:
                    if not self.client.images.get(image).tags:
                        self.client.images.remove(image)
                    pending.discard(image)
                    refused.pop(image, None)
                except docker.errors.ImageNotFound:
                    pending.discard(image)
                except docker.errors.APIError as e:
                    refused[image] = e.explanation or str(e)
            if len(pending) == before:
                break
        # an image another one still stands on (someone's build FROM a test image) is theirs to keep: its tags went
        problems += [f"{image[:19]}: {why}" for image, why in refused.items() if "dependent child images" not in why]
        if problems:
            raise RuntimeError("the test session could not remove what it made (a container still using it?):\n"
                               + "\n".join(problems))
        return made
