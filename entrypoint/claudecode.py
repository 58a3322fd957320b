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
of it (a `${POD:?}` stops only its own line there, and `claude` then went to Anthropic's API). It then asks the
pod once (curl, 5 s at most) and stops with one line on what Claude Code would otherwise retry silently for
minutes: no connection, RunPod's 502 (the image still pulled, the container not up), the key refused. It asks
`/v1/models` with the key rather than `/health`, which answers without one: one request tells all three. A missing
`claude` is installed at the newest checked version (claudecode.toml) under ~/.local, with npm, without root.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass
from typing import Mapping

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from .claudecode_wire import AUTH_TOKEN_VARIABLE
from .contract import VLLM_KEY_VARIABLE, port_number
from .modelnames import served_names
from .vllmoptions import max_model_len

VERSIONS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "claudecode.toml")
PREFIX = "$HOME/.local"  # npm's prefix for Claude Code: its bin/ is ~/.local/bin, in the user's home (no root)
CHECK_S = 5  # the pod check's limit: a refused port or an unknown name fails at once, a silent host takes this long
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


def newest_checked() -> str:
    """The newest Claude Code version the tests run (claudecode.toml), the one the block installs."""
    with open(VERSIONS_PATH, "rb") as handle:
        return tomllib.load(handle)["supported"]["newest"]


@dataclass(frozen=True)
class Target:
    """Where the block points Claude Code: a pod (its address in POD, its key in VLLM_API_KEY) or the router pod
    (docs/router.md: ROUTER, ROUTER_KEY), and what the messages call it."""
    address_variable: str = "POD"
    key_variable: str = VLLM_KEY_VARIABLE  # the pod's key: what the pod reads, and what every doc exports on your side
    what: str = "the pod"
    example: str = "https://<pod id>-8080.proxy.runpod.net"
    key_source: str = "the one in its RunPod secret"


POD = Target()
ROUTER = Target("ROUTER", "ROUTER_KEY", "the router pod", "https://<router pod id>-8080.proxy.runpod.net",
                "the one in the RunPod secret router_key")


def _export(pairs: list[tuple[str, str]]) -> str:
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in pairs)


def _unset_check(variable: str, what: str) -> str:
    return f'[ -z "${{{variable}:-}}" ]; then echo {shlex.quote(f"set {variable} to {what}")} >&2; false'


def _fails(condition: str, message: str) -> str:
    """No apostrophe in a message: shlex would quote it as '"'"', which a reader of the block stumbles on."""
    return f"{condition}; then echo {shlex.quote(message)} >&2; false"


def _pod_checks(url: str, target: Target) -> list[str]:
    """The conditions that stop the block after asking the pod once: curl's status code in prebake_answer
    (000: no connection within CHECK_S)."""
    key = target.key_variable
    ask = (f'prebake_answer="$(curl -s -o /dev/null -m {CHECK_S} -w \'%{{http_code}}\' '
           f'-H "Authorization: Bearer ${key}" {url}/v1/models)"')
    return [_fails("! command -v curl >/dev/null", "the block checks the pod with curl before it starts Claude Code: "
                   "install curl, then paste again"),
            _fails(f'{ask}; [ "$prebake_answer" = 000 ]',
                   f"{target.what} cannot be reached (no answer within {CHECK_S} s): check the address "
                   f"({target.example}) and that the pod runs (the RunPod console)"),
            _fails('[ "$prebake_answer" = 502 ]',
                   f"RunPod answers 502 for {target.what}: nothing listens on it yet (the image is still being "
                   "pulled, or the container is starting or restarting: the log of the pod in the RunPod console "
                   "says which); paste again in a minute"),
            _fails('[ "$prebake_answer" = 401 ]',
                   f"{target.what} refused the key: {key} is not its key ({target.key_source})")]


def install_line(version: str) -> str:
    quoted = shlex.quote(f"installing Claude Code {version} (the newest version prebake checks) with npm under "
                         "~/.local, no root needed")
    return (f"command -v claude >/dev/null || {{ echo {quoted}; "
            f'npm install -g --prefix "{PREFIX}" @anthropic-ai/claude-code@{version}; }}')


def paste_block(base_url: str, model: str, context: int, others: tuple[str, ...] = (), target: Target = POD) -> str:
    """The shell lines to paste: check the variables and the pod, install Claude Code if missing, point it at
    the pod with its key, pin its models to the pod's and match its compaction to the pod's context, start it.
    `base_url` is written as given (a shell expression such as "$POD" stays one); the key stays the target's
    variable (VLLM_API_KEY). One `if`: with the address (when it is the variable) or the key unset, or the pod
    not answering, it says what is wrong in one line and nothing else runs.
    No comments: an interactive zsh without `interactivecomments` (its default, macOS's shell) takes `#` as a
    word, so a comment became arguments and an apostrophe in one opened a quote; what needs saying is echoed."""
    variables = settings(model, context, others)
    pins, window = variables[:4], variables[4:]
    url = base_url if base_url.startswith('"') else shlex.quote(base_url)
    key = target.key_variable
    checks = [_unset_check(key, f"the API key of {target.what}")]
    if url == f'"${target.address_variable}"':  # unset, it would point Claude Code at Anthropic's own API
        checks.insert(0, _unset_check(target.address_variable, f"the address of {target.what}, {target.example}"))
    checks += _pod_checks(url, target)
    lines = [f"if {checks[0]}", *(f"elif {check}" for check in checks[1:]), "else",
             f'export PATH="{PREFIX}/bin:$PATH"',
             install_line(newest_checked()),
             f"export ANTHROPIC_BASE_URL={url}",
             f'export {AUTH_TOKEN_VARIABLE}="${key}"',
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
    """The block for the pod the launcher's state describes, or None without a served name or a context (a block
    without the context would let Claude Code guess it). Without a swap set: the served name and context of its
    vLLM argv. With one, swap: (name, context) of each model of the set in VL_SWAP's order, the set alone names
    the models, since the state's argv is the vLLM started last (with sleep mode, the set's last model, asleep):
    the first model is pinned, sonnet on the second (docs/swap.md), and the context is the smallest, so that
    Claude Code compacts before any of them is full."""
    argv = [str(token) for token in state.get("argv") or []]
    names = [name for name, _ in swap] or served_names(argv)
    if not names:
        return None
    contexts = [size for _, size in swap if size]
    context = min(contexts) if contexts else _context(argv)
    if context is None:
        return None
    model, others = names[0], tuple(names[1:]) if swap else ()
    url = pod_url(environ, state.get("decisions") or [])
    return {"model": model, "context": context, "base_url": url, "swaps_to": list(others),
            "paste": paste_block(url, model, context, others)}


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
