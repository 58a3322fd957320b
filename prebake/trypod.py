"""`./build.py try`: a pod on this machine without a GPU. The real image runs as on RunPod (its marker, its
launcher's decisions, the keep-alive bridge, the page, the status, the key check), with the tests' stand-ins
mounted in place of what needs a GPU: an `nvidia-smi` that prints a host of the repository's profiles
(tests/fixtures/hosts/) and a `vllm` that is the stand-in engine (prebake_testing/standin.py), whose every answer
says that no model is behind it. So a newcomer can open the pod's page and connect Claude Code before renting one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import docker

from prebake.errors import PrebakeError

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "prebake_testing" / "standin.py"
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
FAKE_SMI = HOSTS / "fake_nvidia_smi.py"
MOUNT = "/opt/try"  # where the stand-ins are mounted, read-only
PYTHON = "/opt/venv/bin/python"  # the image's venv (templates/stack.Dockerfile.j2)
POD_PORT = 8080  # the port the image serves on (VL_PORT), published on 127.0.0.1 only
READY_S = 120  # the launcher and the bridge start in seconds; a cold image's first imports take longer
SAY = ("[prebake try: no model is behind this pod. This answer comes from a stand-in engine (./build.py try) "
       "that replaces vLLM on a machine without a GPU; rent a GPU pod for real answers.]")
LABEL = "prebake.try"


def host_profiles() -> list[str]:
    return sorted(path.stem for path in HOSTS.glob("*.json") if json.loads(path.read_text()).get("gpus"))


@dataclass(frozen=True)
class TryPod:
    container: str
    port: int
    block: str  # the pod's own Claude Code block, from its status page

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"


def _stand_ins(folder: Path, host: str) -> Path:
    """The folder mounted at MOUNT: the stand-in engine as `vllm`, the fake nvidia-smi for `host`."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy(STANDIN, folder / "standin.py")
    shutil.copy(FAKE_SMI, folder / "fake_nvidia_smi.py")
    shutil.copy(HOSTS / f"{host}.json", folder / "host.json")
    shims = {"vllm": f'exec {PYTHON} {MOUNT}/standin.py "$@"\n',
             "nvidia-smi": f'FAKE_NVIDIA_SMI_HOST={MOUNT}/host.json exec {PYTHON} -S {MOUNT}/fake_nvidia_smi.py "$@"\n'}
    for name, line in shims.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + line)
        (bin_dir / name).chmod(0o755)
    folder.chmod(0o755)  # mkdtemp makes it 0700: the container's user must read it
    return folder


def _image_path(image) -> str:
    env = dict(item.split("=", 1) for item in image.attrs["Config"].get("Env") or [] if "=" in item)
    return env.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def _get(url: str, key: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def start(client: docker.DockerClient, image_ref: str, port: int, key: str, host: str) -> TryPod:
    """Run `image_ref` with the stand-ins, published on 127.0.0.1:`port`, and wait until its bridge serves."""
    if not key.strip():
        raise PrebakeError("VLLM_API_KEY is empty: export the key the pod should demand first (docs/quickstart.md, "
                           "step 2), then run again; the block you paste reads it from the same variable")
    if host not in host_profiles():
        raise PrebakeError(f"--host {host}: not a host profile; pick one of {', '.join(host_profiles())}")
    try:
        image = client.images.get(image_ref)
    except docker.errors.ImageNotFound:
        raise PrebakeError(f"--image {image_ref}: not in the local Docker Engine; build it first (`./build.py "
                           "--variant a40`, docs/quickstart.md) or `docker pull` it, then run again") from None
    folder = _stand_ins(Path(tempfile.mkdtemp(prefix="prebake-try-")), host)
    name = f"prebake-try-{port}"
    try:
        container = client.containers.run(
            image.id, detach=True, auto_remove=True, name=name, labels={LABEL: image_ref},
            ports={f"{POD_PORT}/tcp": ("127.0.0.1", port)}, volumes={str(folder): {"bind": MOUNT, "mode": "ro"}},
            environment={"VLLM_API_KEY": key, "VL_PORT": str(POD_PORT), "STANDIN_SAY": SAY,
                         "VL_NVIDIA_SMI": f"{MOUNT}/bin/nvidia-smi", "PATH": f"{MOUNT}/bin:{_image_path(image)}"})
    except docker.errors.APIError as error:
        raise PrebakeError(f"could not start the container {name}: {error.explanation or error}. A port in use: "
                           "pass --port with a free one; a container of that name: `docker stop " + name + "`") from None
    deadline = time.monotonic() + READY_S
    while _get(f"http://127.0.0.1:{port}/health", key)[0] != 200:
        container.reload()
        if container.status not in ("created", "running") or time.monotonic() > deadline:
            logs = container.logs(tail=30).decode(errors="replace") if container.status == "running" else ""
            if container.status == "running":
                container.stop(timeout=10)
            raise PrebakeError(f"the pod in {name} did not serve within {READY_S} s ({container.status}); its last "
                               f"lines:\n{logs}")
        time.sleep(0.5)
    status, body = _get(f"http://127.0.0.1:{port}/prebake/status", key)
    block = (json.loads(body).get("claude_code") or {}).get("paste") if status == 200 else None
    if not block:
        raise PrebakeError(f"the pod in {name} serves, but its status page gave no Claude Code block ({status})")
    return TryPod(name, port, block)


def report(pod: TryPod, image_ref: str) -> str:
    return (f"{image_ref} runs in the container {pod.container} with a stand-in engine in place of vLLM: no GPU, "
            "no model; every answer says so.\n"
            f"page:    {pod.url}/ (open it in a browser)\n"
            f"connect: export POD={pod.url}, then paste the block below in a shell where VLLM_API_KEY holds the "
            "same key\n"
            f"stop:    docker stop {pod.container}\n\n{pod.block}")
