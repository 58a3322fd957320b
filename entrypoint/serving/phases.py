"""The phase of vLLM's start, read from its log lines (phases.toml) and its health.

starting -> loading weights -> compiling -> capturing graphs -> serving; swapping while another
model is being started in its place; failed once vLLM died or the watchdog gave up on it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PHASES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "phases.toml")
ORDER = ("starting", "loading weights", "compiling", "capturing graphs", "serving", "swapping", "failed")
MEANING = {
    "starting": "vLLM is starting: reading its configuration and the model's, spawning its engine",
    "loading weights": "downloading (first start) and loading the weights onto the GPUs",
    "compiling": "torch.compile, Inductor and Triton compile the model, or load it from the compile cache",
    "capturing graphs": "sizing the KV cache, warming up and capturing CUDA graphs; the API server starts next",
    "serving": "vLLM's GET /health answers: requests are relayed",
    "swapping": "another model is being started in this one's place",
    "failed": "vLLM exited, or stopped answering its health check while serving",
}


@dataclass(frozen=True)
class Marker:
    text: str
    phase: str
    file: str  # where vLLM prints it, under site-packages


def load_markers(path: str = PHASES_PATH) -> tuple[Marker, ...]:
    with open(path, "rb") as handle:
        lines = tomllib.load(handle)["line"]
    markers = tuple(Marker(entry["text"], entry["phase"], entry["file"]) for entry in lines)
    unknown = [m.phase for m in markers if m.phase not in ORDER]
    if unknown:
        raise ValueError(f"{path}: unknown phase(s) {unknown}; known: {ORDER}")
    return markers


class LogPhase:
    """The phase the log lines seen so far point to, and the line that set it."""

    def __init__(self, markers: tuple[Marker, ...] | None = None) -> None:
        self.markers = markers if markers is not None else load_markers()
        self.phase = "starting"
        self.line = ""

    def feed(self, line: str) -> bool:
        """True when this line moved the phase."""
        for marker in self.markers:
            if marker.text in line:
                changed = marker.phase != self.phase
                self.phase, self.line = marker.phase, line.strip()
                return changed
        return False
