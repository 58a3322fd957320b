"""Replay a recorded Claude Code session through the real bridge, and print what its status page says of it.

    python benchmarks/session_replay.py [--session tests/fixtures/claude_code_session.jsonl.xz] [--json]

Each main-conversation request of the recording (benchmarks/claude_session_standin.py made it with the real
`claude` CLI) goes, under one X-Claude-Code-Session-Id, through the keep-alive bridge to the stand-in vLLM,
which reports cached tokens as vLLM does (STANDIN_PREFIX_CACHE: the prompt's JSON text less cache_control
marks, 4 bytes a token, 16-token blocks: a prefix cache that sees what the request says, not what a chat
template renders of it). Then the two events that benchmarks/prefix_cache_bench.py measures with vLLM's own
renderer, as the requests carry them: a new user prompt after turns that reasoned, and `claude --continue`
after the repository changed (a new gitStatus snapshot in the system prompt). Prints the session's line of the
status page and each turn that prefilled beyond its new part with where its prompt first differs.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from benchmarks.prefix_cache_bench import SESSION, load_session, with_reasoning
from entrypoint.serving.sessions import render_lines
from prebake_testing.net import get, request
from prebake_testing.servers import StandIn, start_bridge

KEY = "sk-session-replay"
SESSION_ID = "replayed-session"


def send(bridge, body: dict) -> None:
    raw = json.dumps(body, separators=(",", ":")).encode()  # Claude Code's compact JSON
    status, _, answer = request(bridge.port, "POST", "/v1/messages", raw, headers={
        "authorization": f"Bearer {KEY}", "content-type": "application/json", "x-claude-code-session-id": SESSION_ID})
    if status != 200:
        raise SystemExit(f"the bridge answered {status}: {answer[:300]!r}")


def events(last: dict) -> list[tuple[str, dict]]:
    """The requests after the recording: the last one with reasoning, a new prompt, then --continue."""
    reasoned = with_reasoning(last, 40)
    prompt = copy.deepcopy(reasoned)
    prompt["messages"] += [{"role": "assistant", "content": [{"type": "thinking", "thinking": "done", "signature": "s"},
                                                             {"type": "text", "text": "All steps done."}]},
                           {"role": "user", "content": [{"type": "text", "text": "Now run them again."}]}]
    resumed = copy.deepcopy(prompt)
    for block in resumed["system"]:
        if "gitStatus:" in block.get("text", ""):
            block["text"] = block["text"].replace("Status:\n?? README.md", "Status:\nM README.md\n?? notes.md")
    return [("the last request, its turns with reasoning", reasoned), ("a new user prompt", prompt),
            ("claude --continue after the repository changed", resumed)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, default=SESSION)
    parser.add_argument("--json", action="store_true", help="print the status page's sessions as JSON")
    args = parser.parse_args()
    bodies = load_session(args.session)
    vllm = StandIn(env={"STANDIN_PREFIX_CACHE": "1"})
    bridge = start_bridge(vllm.port, key=KEY)
    try:
        for body in bodies:
            send(bridge, body)
        turns = {}
        for what, body in events(bodies[-1]):
            send(bridge, body)
            turns[len(bodies) + len(turns) + 1] = what
        sessions = get(bridge.port, "/prebake/status", {"authorization": f"Bearer {KEY}"})[2]["sessions"]
    finally:
        bridge.stop()
        vllm.stop()
    if args.json:
        print(json.dumps(sessions, indent=1))
        return
    print(f"{len(bodies)} recorded requests, then: " + "; ".join(f"turn {n}: {what}" for n, what in turns.items()))
    print("\n".join(render_lines(sessions)))


if __name__ == "__main__":
    main()
