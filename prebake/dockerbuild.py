"""Run one image build through the Docker SDK and report its progress step by step."""

import io
import os
import re
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, TextIO

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from prebake.errors import PrebakeError

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TAIL_LINES = 25


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    steps: int
    cached_steps: tuple[int, ...]  # the steps Docker took from its cache
    seconds: float


def connect() -> docker.DockerClient:
    """A client for the local Docker Engine, or a clear error when none answers."""
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as e:
        raise PrebakeError(
            f"cannot reach a Docker daemon at {where} ({e.__class__.__name__}). Start one "
            "(`sudo systemctl start docker`, or `dockerd &`) or point DOCKER_HOST at it, then run again."
        ) from None
    return client


class StepPrinter:
    """Prints 'step N of M', the step, and the elapsed time; keeps the current step's last lines."""

    def __init__(self, label: str, out: TextIO = sys.stderr, verbose: bool = False, clock: Callable[[], float] = time.monotonic):
        self.label, self.out, self.verbose, self.clock = label, out, verbose, clock
        self.started = clock()
        self.step = 0
        self.total = 0
        self.instruction = ""
        self.cached: list[int] = []
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)

    def line(self, text: str) -> None:
        match = _STEP.match(text)
        if match:
            self.step, self.total, self.instruction = int(match[1]), int(match[2]), match[3]
            self.tail.clear()
            shown = self.instruction if len(self.instruction) <= 100 else self.instruction[:97] + "..."
            print(f"[{self.label}] step {self.step}/{self.total} ({self.clock() - self.started:6.1f}s) {shown}",
                  file=self.out, flush=True)
            return
        if text.strip() == "---> Using cache":
            self.cached.append(self.step)
        self.tail.append(text)
        if self.verbose:
            print(f"    {text}", file=self.out, flush=True)

    def failure(self, message: str) -> PrebakeError:
        where = f"step {self.step}/{self.total} ({self.instruction})" if self.step else "before the first step"
        tail = "\n".join(f"    {line}" for line in self.tail if line.strip())
        return PrebakeError(f"the {self.label} build failed at {where}:\n{tail}\n    {message.strip()}")


def _lines(chunks: Iterable[Mapping], printer: StepPrinter) -> str:
    image_id = ""
    for chunk in chunks:
        if "error" in chunk:
            raise printer.failure(chunk.get("error", ""))
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        for text in _ANSI.sub("", chunk.get("stream", "")).splitlines():
            if text.strip():
                printer.line(text.rstrip())
    if not image_id:
        raise printer.failure("Docker reported no image id")
    return image_id


def build(
    client: docker.DockerClient,
    context: bytes,
    *,
    label: str,
    buildargs: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    verbose: bool = False,
    no_cache: bool = False,
) -> BuildResult:
    """Build an untagged image from a tar context; tags are applied only once the image is proven good."""
    printer = StepPrinter(label, verbose=verbose)
    try:
        chunks = client.api.build(
            fileobj=io.BytesIO(context), custom_context=True, encoding=None, dockerfile="Dockerfile",
            buildargs=dict(buildargs), labels=dict(labels or {}), rm=True, forcerm=True, decode=True, nocache=no_cache,
        )
        image_id = _lines(chunks, printer)
    except docker.errors.APIError as e:
        raise printer.failure(str(e.explanation or e)) from None
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as e:
        raise printer.failure(f"the Docker Engine stopped answering ({e.__class__.__name__}: no output for "
                              f"{client.api.timeout} s); see `docker ps` and the daemon's log") from None
    return BuildResult(image_id=image_id, steps=printer.total, cached_steps=tuple(printer.cached),
                       seconds=printer.clock() - printer.started)
