"""What Claude Code needs to use a pod: one block of shell, for the pod's model and context.

The quickstart shows it per variant and the status page prints it for its own pod (`python3 -m
entrypoint.claudecode --model ornith --context 524288` prints it too). What Claude Code 2.1.x does with
each variable, read from its binary (`strings`) and checked with `claude -p /context` (2.1.197, 2026-12-01):
- ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL replace its model aliases: its default (`opus[1m]`), `--model
  haiku`, `/model`, subagents. Any other `claude-*` name still reaches the pod: the bridge renames it.
- The context window of a name it does not know is 200,000 tokens, or 1,000,000 with `[1m]`, which its
  default model carries. CLAUDE_CODE_MAX_CONTEXT_TOKENS sets it for a name that does not start with
  `claude-` (hence the pins name the pod's model itself), and CLAUDE_CODE_DISABLE_1M_CONTEXT=1 keeps
  `[1m]` from overriding it: `/context` then shows the pod's context.
- CLAUDE_CODE_AUTO_COMPACT_WINDOW (100,000 to 1,000,000; smaller values count as 100,000) caps the window
  its auto-compaction works from; it compacts before the window less min(max output, 20,000) tokens.
- CLAUDE_CODE_MAX_OUTPUT_TOKENS is its requests' max_tokens (32,000 by default for a name it does not know):
  at most the 20,000 tokens it keeps free of the window, so that a request just under the compaction
  threshold still fits the pod's context with its answer.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from typing import Mapping

from .contract import API_KEY_VARIABLE, port_number
from .modelnames import served_names

INSTALL = "command -v claude >/dev/null || npm install -g @anthropic-ai/claude-code"
KEY_VARIABLE = API_KEY_VARIABLE  # the pod's key: what the pod reads, and what every doc exports on your side
COMPACT_WINDOW_RANGE = (100_000, 1_000_000)  # CLAUDE_CODE_AUTO_COMPACT_WINDOW's bounds in Claude Code 2.1.x
OUTPUT_RESERVE = 20_000  # what Claude Code keeps free of the window for the answer


def settings(model: str, context: int | None, others: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Claude Code's variables for a pod serving `model` with `context` tokens (None: unknown). `others`: the
    other models of a pod that swaps (swap.md): `sonnet` names the first of them, so `/model sonnet` swaps."""
    pinned = [(f"ANTHROPIC_DEFAULT_{alias}_MODEL", others[0] if others and alias == "SONNET" else model)
              for alias in ("OPUS", "SONNET", "HAIKU")]
    if not context:
        return pinned
    window = [("CLAUDE_CODE_DISABLE_1M_CONTEXT", "1"), ("CLAUDE_CODE_MAX_CONTEXT_TOKENS", str(context))]
    if context >= COMPACT_WINDOW_RANGE[0]:
        window.append(("CLAUDE_CODE_AUTO_COMPACT_WINDOW", str(min(context, COMPACT_WINDOW_RANGE[1]))))
    window.append(("CLAUDE_CODE_MAX_OUTPUT_TOKENS", str(min(OUTPUT_RESERVE, context // 4))))
    return pinned + window


def _export(pairs: list[tuple[str, str]]) -> str:
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in pairs)


def paste_block(base_url: str, model: str, context: int | None, others: tuple[str, ...] = ()) -> str:
    """The shell lines to paste: install Claude Code if missing, point it at the pod with its key, pin its
    models to the pod's and match its compaction to the pod's context, start it. `base_url` is written as
    given (a shell expression such as "$POD" stays one); the key stays the variable VLLM_API_KEY."""
    variables = settings(model, context, others)
    pins, window = variables[:3], variables[3:]
    url = base_url if base_url.startswith('"') else shlex.quote(base_url)
    if url == '"$POD"':  # an unset POD stops here, rather than point Claude Code at Anthropic's own API
        url = '"${POD:?set POD to the address of the pod, https://<pod id>-8080.proxy.runpod.net}"'
    lines = [f"{INSTALL}   # Claude Code itself, once (Node.js 18+)",
             f"export ANTHROPIC_BASE_URL={url}   # the pod, without /v1",
             f'export ANTHROPIC_AUTH_TOKEN="${{{KEY_VARIABLE}:?set {KEY_VARIABLE} to the API key of the pod}}"'
             "   # sent as Authorization: Bearer",
             _export(pins)]
    if window:
        lines.append(_export(window[:2]) + f"   # the pod's context: {context:,} tokens")
        lines.append(_export(window[2:]))
    else:
        lines.append("# the pod's context is unknown: Claude Code assumes 200,000 tokens")
    if others:
        lines.append(f"# this pod swaps between {', '.join((model, *others))}: `/model NAME` in Claude Code picks one "
                     "(the first request for it waits for the swap)")
    lines.append("claude")
    return "\n".join(lines) + "\n"


def _context(argv: list[str]) -> int | None:
    found = None
    for position, token in enumerate(argv):
        if token == "--max-model-len" and position + 1 < len(argv):
            found = argv[position + 1]
        elif token.startswith("--max-model-len="):
            found = token.split("=", 1)[1]
    return int(found) if found and re.fullmatch(r"[0-9]+", found) else None  # "²".isdigit() is True; int() raises


def pod_url(environ: Mapping[str, str], decisions: list[dict]) -> str:
    """The pod's address as a client reaches it: RunPod's proxy URL from RUNPOD_POD_ID and the exposed port
    (the launcher's "port" decision), else the shell's "$POD"."""
    port = next((d.get("decision") for d in decisions if isinstance(d, dict) and d.get("topic") == "port"), None)
    pod = environ.get("RUNPOD_POD_ID", "")
    if pod and port_number(str(port)) and all(c.isalnum() or c == "-" for c in pod):
        return f"https://{pod}-{port}.proxy.runpod.net"
    return '"$POD"'


def for_pod(state: Mapping, environ: Mapping[str, str], swap: tuple[tuple[str, int | None], ...] = ()) -> dict | None:
    """The block for the pod the launcher's state describes (its vLLM argv: served name, context), or None.
    swap: (name, context) of each model of a swap set, the first being the argv's: the pins name them, and the
    context is the smallest, so that Claude Code compacts before any of them is full."""
    argv = [str(token) for token in state.get("argv") or []]
    names = served_names(argv)
    if not names:
        return None
    context, others = _context(argv), tuple(name for name, _ in swap[1:])
    contexts = [size for _, size in swap if size]
    if contexts:
        context = min(contexts)
    url = pod_url(environ, state.get("decisions") or [])
    return {"model": names[0], "context": context, "base_url": url, "swaps_to": list(others),
            "paste": paste_block(url, names[0], context, others)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m entrypoint.claudecode", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the pod's served name (ornith, nemotron, ...)")
    parser.add_argument("--context", type=int, help="the pod's context, vLLM's --max-model-len")
    parser.add_argument("--url", default='"$POD"', help="the pod's address (default: the shell's $POD)")
    args = parser.parse_args(argv)
    sys.stdout.write(paste_block(args.url, args.model, args.context))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
