"""`launch.py --help`: the launcher's own help, printed without a marker, a GPU or vLLM.

Everything in it comes from the code that acts on it (the knobs' table, the catalogue, the exit codes), so the
help cannot drift from what the launcher does.
"""

from __future__ import annotations

import textwrap

from .catalogue import load_catalogue
from .report import EXIT_BUG, EXIT_CONFIG, EXIT_HOST, EXIT_MARKER, EXIT_WATCHDOG, LaunchError
from .knobs import KNOBS
from ..contract import EXIT_BRIDGE

HELP_FLAGS = ("--help", "-h")

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "--dry-run or --help printed; after a real start, vLLM's own exit code (128+N when signal N ended it)"),
    (EXIT_BUG, "a launcher bug: one line naming the exception and file:line, to report; vLLM was not started"),
    (EXIT_CONFIG, "a value is wrong: a VL_* variable (environment or the image's defaults), a container argument, "
                  "the catalogue; the line names it and the accepted values"),
    (EXIT_HOST, "the host: no GPU, nvidia-smi missing or failing, driver too old for the image, compat libraries "
                "missing, a port in use, no vllm"),
    (EXIT_MARKER, "the image was not prebaked: the marker /opt/.image_prebaked (or $VL_PREBAKED_MARKER) is "
                  "missing or unreadable"),
    (EXIT_BRIDGE, "the keep-alive bridge died, and vLLM was stopped so that the pod does not look alive"),
    (EXIT_WATCHDOG, "the watchdog: vLLM had served, then stopped answering its health check for VL_WATCHDOG "
                    "seconds, so it was stopped and the pod restarts (the status page says why); or, with VL_SWAP, "
                    "the previous model did not answer again within VL_SWAP_LOAD after a failed swap"),
)

_INDENT = " " * 6


# vLLM's `serve --help` fails without a GPU ("Failed to infer device type"); this runs its parser on a stand-in
# platform (entrypoint/vllm_help.py). The path is where the image keeps the launcher.
VLLM_HELP = "docker run --rm --entrypoint python IMAGE /opt/prebake/entrypoint/vllm_help.py"


def _wrap(text: str, indent: str = _INDENT) -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent)


def _models() -> str:
    try:
        keys = ", ".join(load_catalogue())
    except LaunchError as err:  # the help still prints; the start would say the same
        keys = f"(the catalogue cannot be read: {err})"
    return _wrap(f"catalogue keys for VL_MODEL: {keys}; or any Hugging Face repo id owner/name", "  ")


def help_text() -> str:
    lines = [
        "usage: launch.py [--dry-run] [--help] [vllm serve options...]",
        "",
        _wrap("The prebake image's launcher. It reads the marker /opt/.image_prebaked, the VL_* variables and "
              "the host's GPUs (nvidia-smi), decides, and starts `vllm serve` behind the keep-alive bridge on "
              "VL_PORT (or execs vLLM itself with VL_BRIDGE=off). It installs and downloads nothing; each "
              "decision is logged on stderr as `[prebake] <topic>: <decision> (<why>)`.", ""),
        "",
        "options:",
        "  --dry-run   print the plan as one JSON object on stdout (argv, env, decisions, bridge) and exit 0;",
        "              nothing starts. The `context` decision gives the context length (--max-model-len).",
        "  --help, -h  this help; needs no marker, GPU or vLLM",
        _wrap("Every other argument is appended to `vllm serve`; where it names an option the launcher sets, "
              "yours wins. vLLM's own options, on any machine with Docker (`vllm serve --help` needs a GPU): "
              f"`{VLLM_HELP} [--help=all | --help=max-model-len | ...]`.", "  "),
        "",
        "environment (the container's value, else the image's default, else the one shown; empty = unset):",
    ]
    for knob in KNOBS:
        default = knob.default if knob.default else "(decided)"
        lines.append(f"  {knob.name}={default}" if knob.default else f"  {knob.name}  {default}")
        lines.append(_wrap(f"{knob.meaning}. Accepted: {knob.accepted}."))
    lines += ["", _models(), "", "exit codes:"]
    for code, meaning in EXIT_CODES:
        lines.append(textwrap.fill(meaning, width=100, initial_indent=f"  {code}  ", subsequent_indent=_INDENT))
    lines += ["", "More: docs/entrypoint.md and docs/troubleshooting.md in the prebake repository."]
    return "\n".join(lines)
