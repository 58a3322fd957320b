"""Push with zstd-compressed layers through skopeo (containers/image), where Docker cannot.

The Docker Engine (and so the Docker SDK) pushes gzip only, compressing on one core. skopeo
copies an image from the local engine (`docker-daemon:`) to a registry and compresses its
layers itself, with zstd when asked; the engines that pull zstd layers are in docs/publishing.md.
Compression is deterministic for a given layer, level and skopeo, so a variant's stack layers get
the digests the stack's own push gave them, and a pod that has one variant pulls only the
other's small layers.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

from prebake import pushing
from prebake.errors import PrebakeError
from prebake.references import is_loopback_host

_POLL_S = 0.25
_MIN_MOVE_BYTES = 4096  # far below any upload's rate per poll, far above the runtime's wake-ups
COMPRESSIONS = ("gzip", "zstd")  # gzip: the engine's own push (every engine pulls it); zstd: skopeo
ZSTD_LEVEL = "3"  # zstd's default: 9 % smaller than gzip -6 on the a40 stack, decompressed ~7x faster


def registry_host(ref: str) -> str:
    return ref.split("/", 1)[0]


def _insecure(host: str) -> bool:
    """Plain HTTP for loopback registries only, as the Docker Engine does by default."""
    return is_loopback_host(host.rsplit(":", 1)[0])


def require() -> str:
    path = shutil.which("skopeo")
    if path is None:
        raise PrebakeError("--compression zstd pushes with skopeo, which is not installed; install it "
                           "(`apt-get install skopeo`, or your distribution's package) or push with gzip")
    return path


def _authfile(ref: str, auth: dict[str, str] | None, folder: str) -> Path | None:
    """Credentials in a 0600 auth file (never on the command line); else the Docker config, as
    `docker login` wrote it; else none."""
    if not auth:
        config = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
        return config if config.is_file() else None
    path = Path(folder) / "auth.json"
    token = base64.b64encode(f"{auth['username']}:{auth['password']}".encode()).decode()
    path.touch(mode=0o600)
    path.write_text(json.dumps({"auths": {registry_host(ref): {"auth": token}}}))
    return path


def _io_bytes(pid: int) -> int | None:
    """Bytes skopeo has read and written so far, sockets included (Linux's /proc/PID/io); None where unreadable."""
    try:
        fields = dict(line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        return int(fields["rchar"]) + int(fields["wchar"])
    except (OSError, ValueError, KeyError):
        return None


def _run(command: list[str], seconds: float) -> tuple[int | None, str]:
    """Run skopeo; kill it after `seconds` without a sign of life. Returns (exit status or None if killed, stderr).

    skopeo prints a line per blob, then nothing while a blob of gigabytes uploads, so its output alone cannot
    tell a slow upload from a hung registry. Its byte counters can: an upload (or the read of the image from the
    engine) moves bytes every moment, a registry that stopped answering leaves skopeo waiting with none moving
    but the Go runtime's own wake-ups (2 bytes now and then, which kept a hung push alive for 20 s past a 2 s
    limit): only _MIN_MOVE_BYTES or more since the last movement count.
    This is the engine path's bounded silence (PREBAKE_PUSH_TIMEOUT_S), not a bound on the whole push. Where
    /proc/PID/io cannot be read (not Linux), only output counts: then a blob upload longer than the time-out
    is cut, and PREBAKE_PUSH_TIMEOUT_S must be raised.
    """
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace")
    lines: list[str] = []
    last_word = [time.monotonic()]

    def read(stream: TextIO, keep: bool) -> None:
        for line in stream:
            last_word[0] = time.monotonic()
            if keep:
                lines.append(line)

    readers = [threading.Thread(target=read, args=(process.stdout, False), daemon=True),
               threading.Thread(target=read, args=(process.stderr, True), daemon=True)]
    for reader in readers:
        reader.start()
    moved, last_move = _io_bytes(process.pid), time.monotonic()
    try:
        while process.poll() is None:
            time.sleep(_POLL_S)
            now, counted = time.monotonic(), _io_bytes(process.pid)
            if counted is not None and (moved is None or counted - moved >= _MIN_MOVE_BYTES):
                moved, last_move = counted, now
            if now - max(last_move, last_word[0]) > seconds:
                process.kill()
                process.wait()
                return None, "".join(lines)
    finally:
        if process.poll() is None:  # interrupted (Ctrl-C): no skopeo left behind
            process.kill()
            process.wait()
        for reader in readers:
            reader.join(timeout=5)
    return process.returncode, "".join(lines)


def _last_error(stderr: str, returncode: int) -> str:
    """skopeo's last line, its fatal `msg="..."` unwrapped."""
    lines = stderr.strip().splitlines()
    if not lines:
        return f"exit {returncode}"
    line = lines[-1]
    if 'msg="' in line:
        line = line.split('msg="', 1)[1].rstrip().removesuffix('"').replace('\\"', '"')
    return line


def _copy(source: str, dest_ref: str, extra: list[str], auth: dict[str, str] | None) -> str:
    from_registry = source.startswith("docker://")
    seconds = pushing.push_timeout_s()
    with tempfile.TemporaryDirectory(prefix="prebake-skopeo-") as folder:
        digest_file = Path(folder) / "digest"
        command = [require(), "copy", "--retry-times", "2", "--digestfile", str(digest_file), *extra]
        authfile = _authfile(dest_ref, auth, folder)
        if authfile:
            command += ["--dest-authfile", str(authfile)] + (["--src-authfile", str(authfile)] if from_registry else [])
        if _insecure(registry_host(dest_ref)):
            command += ["--dest-tls-verify=false"] + (["--src-tls-verify=false"] if from_registry else [])
        returncode, stderr = _run([*command, source, f"docker://{dest_ref}"], seconds)
        if returncode is None:
            raise PrebakeError(pushing.hung_message(dest_ref, seconds))
        if returncode != 0:
            error = pushing.redact(f"skopeo: {_last_error(stderr, returncode)}", auth)
            raise PrebakeError(pushing.refused_message(dest_ref, error))
        return digest_file.read_text().strip()


def push_from_engine(local_ref: str, dest_ref: str, auth: dict[str, str] | None, out: TextIO = sys.stderr) -> str:
    """Copy `local_ref` from the local engine to `dest_ref` with zstd layers; return the manifest digest."""
    print(f"[push] {dest_ref} (zstd, skopeo)", file=out, flush=True)
    extra = ["--dest-compress-format", "zstd", "--dest-compress-level", ZSTD_LEVEL]
    host = os.environ.get("DOCKER_HOST")
    if host:
        extra += ["--src-daemon-host", host]
    return _copy(f"docker-daemon:{local_ref}", dest_ref, extra, auth)


def tag_in_registry(pushed_ref: str, digest: str, dest_ref: str, auth: dict[str, str] | None,
                    out: TextIO = sys.stderr) -> str:
    """Point `dest_ref` at the manifest already pushed as `pushed_ref` (same repository: only the
    manifest travels, byte for byte, so the digest stays)."""
    print(f"[push] {dest_ref} (-> {digest[:19]})", file=out, flush=True)
    repository = pushed_ref.split("@")[0] if "@" in pushed_ref else pushed_ref.rsplit(":", 1)[0]
    return _copy(f"docker://{repository}@{digest}", dest_ref, ["--preserve-digests"], auth)
