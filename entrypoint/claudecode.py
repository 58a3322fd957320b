"""What Claude Code needs to use a pod: one block of shell (the paste block's settings), for the pod's model and
context. What Claude Code then sends the pod, and what the pod reads of it, is claudecode_wire.py's.

The quickstart shows it per variant and the status page prints it for its own pod (`./build.py
claude-code --model ornith --context 524288` prints it too). What Claude Code does with each variable,
read from its binary (`strings`) and checked with `claude -p /context` at the versions of
claudecode.toml (2.1.197 and 2.1.332, 2026-12-01):
- ANTHROPIC_MODEL is the model it starts on, without the `[1m]` its default (`opus[1m]`) carries;
  ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL replace its model aliases (`--model haiku`, `/model`,
  subagents). Any other `claude-*` name still reaches the pod: the bridge renames it.
- The context window of a name it does not know is 200,000 tokens in 2.1.197, 1,000,000 in 2.1.332 (which warns
  "Claude Code doesn't recognize the model ..., so it assumes a context window of 1m tokens"), 1,000,000 with
  `[1m]` in both: hence the block always carries the context (tests/serving/test_claude_code_texts.py).
  CLAUDE_CODE_MAX_CONTEXT_TOKENS sets it for a name that does not start with `claude-` (hence the pins
  name the pod's model itself), and CLAUDE_CODE_AUTO_COMPACT_WINDOW (100,000 to 1,000,000; smaller values
  count as 100,000) caps it, a `[1m]` name's too: `/context` shows the pod's context. It compacts before
  the window less min(max output, 20,000) tokens.
- CLAUDE_CODE_DISABLE_1M_CONTEXT=1 makes it take 200,000 for a `[1m]` name; 2.1.332 then warns ("the 200K
  limit isn't enforced for <model>") when the compaction window is above 200,000 or not set, so the block
  sets it only for a pod under 100,000 tokens, whose window is set at 100,000.
- CLAUDE_CODE_MAX_OUTPUT_TOKENS is its requests' max_tokens (32,000 by default for a name it does not know):
  at most the 20,000 tokens it keeps free of the window, so that a request just under the compaction
  threshold still fits the pod's context with its answer.
The block is one `if` command: pasted into an interactive shell, a missing POD or VLLM_API_KEY stops all
of it (a `${POD:?}` stops only its own line there, and `claude` then went to Anthropic's API).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Mapping

from .claudecode_wire import AUTH_TOKEN_VARIABLE
from .contract import VLLM_KEY_VARIABLE, port_number
from .modelnames import served_names
from .vllmoptions import max_model_len

INSTALL = "command -v claude >/dev/null || npm install -g @anthropic-ai/claude-code"
COMPACT_WINDOW_RANGE = (100_000, 1_000_000)  # CLAUDE_CODE_AUTO_COMPACT_WINDOW's bounds in Claude Code 2.1.x
OUTPUT_RESERVE = 20_000  # what Claude Code keeps free of the window for the answer


def settings(model: str, context: int, others: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Claude Code's variables for a pod serving `model` with `context` tokens. `others`: the other models of a
    pod that swaps (swap.md): `sonnet` names the first of them, so `/model sonnet` swaps."""
    pinned = [("ANTHROPIC_MODEL", model)] + [
        (f"ANTHROPIC_DEFAULT_{alias}_MODEL", others[0] if others and alias == "SONNET" else model)
        for alias in ("OPUS", "SONNET", "HAIKU")]
    low, high = COMPACT_WINDOW_RANGE
    window = [("CLAUDE_CODE_DISABLE_1M_CONTEXT", "1")] if context < low else []
    window += [("CLAUDE_CODE_MAX_CONTEXT_TOKENS", str(context)),
               ("CLAUDE_CODE_AUTO_COMPACT_WINDOW", str(min(max(context, low), high))),
               ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", str(min(OUTPUT_RESERVE, context // 4)))]
    return pinned + window


def _export(pairs: list[tuple[str, str]]) -> str:
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in pairs)


def _unset_check(variable: str, what: str) -> str:
    return f'[ -z "${{{variable}:-}}" ]; then echo {shlex.quote(f"set {variable} to {what}")} >&2; false'


def paste_block(base_url: str, model: str, context: int, others: tuple[str, ...] = ()) -> str:
    """The shell lines to paste: install Claude Code if missing, point it at the pod with its key, pin its
    models to the pod's and match its compaction to the pod's context, start it. `base_url` is written as
    given (a shell expression such as "$POD" stays one); the key stays the variable VLLM_API_KEY. One `if`:
    with POD (when the address is "$POD") or the key unset, it says which to set and nothing else runs.
    No comments: an interactive zsh without `interactivecomments` (its default, macOS's shell) takes `#` as a
    word, so a comment became arguments and an apostrophe in one opened a quote; what needs saying is echoed."""
    variables = settings(model, context, others)
    pins, window = variables[:4], variables[4:]
    url = base_url if base_url.startswith('"') else shlex.quote(base_url)
    checks = [_unset_check(VLLM_KEY_VARIABLE, "the API key of the pod")]
    if url == '"$POD"':  # an unset POD would point Claude Code at Anthropic's own API
        checks.insert(0, _unset_check("POD", "the address of the pod, https://<pod id>-8080.proxy.runpod.net"))
    lines = [f"if {checks[0]}", *(f"elif {check}" for check in checks[1:]), "else",
             INSTALL,
             f"export ANTHROPIC_BASE_URL={url}",
             f'export {AUTH_TOKEN_VARIABLE}="${VLLM_KEY_VARIABLE}"',
             _export(pins), _export(window[:-1]), _export(window[-1:])]
    if others:
        lines.append("echo " + shlex.quote(f"this pod swaps between {', '.join((model, *others))}: /model NAME in "
                                           "Claude Code picks one (the first request for it waits for the swap)"))
    lines.append("claude")
    head = len(checks) + 1  # the checks and `else`; the rest is indented under `else`
    return "\n".join([*lines[:head], *("  " + line for line in lines[head:]), "fi"]) + "\n"


def _context(argv: list[str]) -> int | None:
    return max_model_len(argv)


def pod_url(environ: Mapping[str, str], decisions: list[dict]) -> str:
    """The pod's address as a client reaches it: RunPod's proxy URL from RUNPOD_POD_ID and the exposed port
    (the launcher's "port" decision), else the shell's "$POD"."""
    port = next((d.get("decision") for d in decisions if isinstance(d, dict) and d.get("topic") == "port"), None)
    pod = environ.get("RUNPOD_POD_ID", "")
    if pod and port_number(str(port)) and all(c.isalnum() or c == "-" for c in pod):
        return f"https://{pod}-{port}.proxy.runpod.net"
    return '"$POD"'


def for_pod(state: Mapping, environ: Mapping[str, str], swap: tuple[tuple[str, int | None], ...] = ()) -> dict | None:
    """The block for the pod the launcher's state describes (its vLLM argv: served name, context), or None
    without a served name or a context (a block without the context would let Claude Code guess it).
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
    if context is None:
        return None
    url = pod_url(environ, state.get("decisions") or [])
    return {"model": names[0], "context": context, "base_url": url, "swaps_to": list(others),
            "paste": paste_block(url, names[0], context, others)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m entrypoint.claudecode", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the pod's served name (ornith, nemotron, ...)")
    parser.add_argument("--context", type=int, required=True, help="the pod's context, vLLM's --max-model-len")
    parser.add_argument("--url", default='"$POD"', help="the pod's address (default: the shell's $POD)")
    args = parser.parse_args(argv)
    sys.stdout.write(paste_block(args.url, args.model, args.context))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
