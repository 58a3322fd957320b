"""The Docker Engine the integration tests drive (tests/integration/): images made from others by copying files in."""

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
