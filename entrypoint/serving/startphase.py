"""The phase of vLLM's start, read from its log lines (startphase.toml) and its health (the pod's swap phase is
another thing: modelstate.SwapPhase).

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

LINES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startphase.toml")
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
class PhaseLine:
    """A line vLLM prints when it enters a phase of its start."""
    text: str
    phase: str
    file: str  # where vLLM prints it, under site-packages


def load_phase_lines(path: str = LINES_PATH) -> tuple[PhaseLine, ...]:
    with open(path, "rb") as handle:
        entries = tomllib.load(handle)["line"]
    found = tuple(PhaseLine(entry["text"], entry["phase"], entry["file"]) for entry in entries)
    unknown = [each.phase for each in found if each.phase not in ORDER]
    if unknown:
        raise ValueError(f"{path}: unknown phase(s) {unknown}; known: {ORDER}")
    return found


class LogPhase:
    """The phase the log lines seen so far point to, and the line that set it."""

    def __init__(self, phase_lines: tuple[PhaseLine, ...] | None = None) -> None:
        self.phase_lines = phase_lines if phase_lines is not None else load_phase_lines()
        self.phase = "starting"
        self.line = ""

    def feed(self, line: str) -> bool:
        """True when this line moved the phase."""
        for known in self.phase_lines:
            if known.text in line:
                changed = known.phase != self.phase
                self.phase, self.line = known.phase, line.strip()
                return changed
        return False
