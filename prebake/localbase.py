"""A base image made on this machine (debootstrap, then docker import), for hosts that cannot pull one."""

import io
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import docker

from prebake.errors import PrebakeError


def make_local_base(client: docker.DockerClient, tag: str, suite: str = "bookworm",
                    mirror: str = "http://deb.debian.org/debian") -> str:
    """debootstrap a minimal `suite` and import it as `tag`; return the image id."""
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise PrebakeError("debootstrap is not installed; install it (`apt-get install -y debootstrap`) and run again")
    with tempfile.TemporaryDirectory(prefix="prebake-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        result = subprocess.run([debootstrap, "--variant=minbase", suite, str(root), mirror],
                                capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise PrebakeError(f"debootstrap {suite} from {mirror} failed:\n{tail}")
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            tar.add(root, arcname=".")
        archive.seek(0)
    has_tag = ":" in tag.rsplit("/", 1)[-1]  # 'localhost:5000/base' has a port, not a tag
    repository, _, tag_name = tag.rpartition(":") if has_tag else (tag, "", "latest")
    client.api.import_image_from_data(archive.getvalue(), repository=repository, tag=tag_name,
                                      changes=['CMD ["/bin/bash"]'])
    return client.images.get(f"{repository}:{tag_name}").id
