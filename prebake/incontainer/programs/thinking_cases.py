"""The requests the thinking controls are checked with, as real clients send them (standard library only).

Claude Code 2.1.x, captured against a recording endpoint: POST /v1/messages?beta=true, streaming,
a system prompt whose first block is an x-anthropic-billing-header, a role "system" entry inside
`messages`, tools, context_management; and, for model names it does not know (all of the
catalogue's): thinking adaptive + output_config.effort high + max_tokens 64000 by default,
effort low/medium/max with --effort, thinking disabled with MAX_THINKING_TOKENS=0, no thinking
with CLAUDE_CODE_DISABLE_THINKING=1, thinking enabled with budget_tokens 8000 or 31999 for older
Claude names; background calls (hooks) with thinking disabled, no tools and a json_schema format.
Claude Code 2.1.332: adaptive with display "omitted" (-p) or "updates" (interactive), effort high
for pinned names; with MAX_THINKING_TOKENS=0 or CLAUDE_CODE_DISABLE_THINKING=1 no `thinking` but
still effort high. Without `thinking` Anthropic's API does not think: reasoning off.

Each case says what the engine must get, in terms of the served model's policy:
  budget   ("level", name): that level's budget; ("tokens", N): N; either one only below max_tokens,
           which bounds the thinking by itself; ("none",): no thinking_token_budget; ("off",):
           reasoning off (the model's switch, or a zero budget where it has none)
  same     True: the converted request is vLLM's own, byte for byte
"""

from __future__ import annotations

import copy
from typing import Any

TOOLS = [
    {"name": "Bash", "description": "Executes a bash command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "Read", "description": "Reads a file.",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
]


def claude_code(**changes: Any) -> dict:
    """A main-loop /v1/messages body as Claude Code 2.1.x sends it to a model name it does not know."""
    body = {
        "model": "claude-ornith",
        "max_tokens": 64000,
        "stream": True,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.37; cch=9f3a1;"},
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
             "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List the files, then read setup.py."}]},
            {"role": "system", "content": "The user switched to plan mode."},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should list the files.", "signature": ""},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "setup.py\nREADME.md"}]},
        ],
        "tools": TOOLS,
        "metadata": {"user_id": "user_0123_account__session_4567"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def background_hook() -> dict:
    """A background call (a hook's, a title's): thinking disabled, no tools, a json_schema format."""
    return {
        "model": "claude-ornith", "max_tokens": 32000,
        "system": [{"type": "text", "text": "Generate a short title for this conversation."}],
        "messages": [{"role": "user", "content": "Fix the failing test in tests/test_io.py"}],
        "thinking": {"type": "disabled"},
        "output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"],
            "additionalProperties": False}}},
    }


def chat(**fields: Any) -> dict:
    return {"model": "ornith", "max_tokens": 64000,
            "messages": [{"role": "user", "content": "Read setup.py."}], **fields}


# (name, API, body, expected budget, byte-identical to vLLM's own conversion)
CASES: list[tuple[str, str, dict, tuple, bool]] = [
    ("claude-code default: adaptive + effort high", "messages", claude_code(), ("level", "high"), False),
    ("claude-code --effort low", "messages", claude_code(output_config={"effort": "low"}), ("level", "low"), False),
    ("claude-code --effort medium", "messages", claude_code(output_config={"effort": "medium"}),
     ("level", "medium"), False),
    ("claude-code --effort max", "messages", claude_code(output_config={"effort": "max"}), ("level", "max"), False),
    ("effort xhigh", "messages", claude_code(output_config={"effort": "xhigh"}), ("level", "xhigh"), False),
    ("adaptive without an effort", "messages", claude_code(output_config=None), ("level", "adaptive"), False),
    ("MAX_THINKING_TOKENS=0: thinking disabled", "messages",
     claude_code(thinking={"type": "disabled"}, output_config=None), ("off",), False),
    ("thinking disabled with an effort", "messages", claude_code(thinking={"type": "disabled"}), ("off",), False),
    ("no thinking field, no effort", "messages", claude_code(thinking=None, output_config=None), ("off",), False),
    ("CLAUDE_CODE_DISABLE_THINKING=1 (2.1.332): no thinking, effort high", "messages", claude_code(thinking=None),
     ("off",), False),
    ("2.1.332 -p: adaptive, display omitted, effort high", "messages",
     claude_code(thinking={"type": "adaptive", "display": "omitted"}), ("level", "high"), False),
    ("2.1.332 interactive: adaptive, display updates, effort medium", "messages",
     claude_code(thinking={"type": "adaptive", "display": "updates"}, output_config={"effort": "medium"}),
     ("level", "medium"), False),
    ("older model name: enabled, budget_tokens 8000", "messages",
     claude_code(thinking={"type": "enabled", "budget_tokens": 8000}, output_config=None, max_tokens=32000),
     ("tokens", 8000), False),
    ("older model name: enabled, budget_tokens 31999", "messages",
     claude_code(thinking={"type": "enabled", "budget_tokens": 31999}, output_config=None, max_tokens=32000),
     ("tokens", 31999), False),
    ("budget_tokens beyond max_tokens", "messages",
     claude_code(thinking={"type": "enabled", "budget_tokens": 31999}, output_config=None, max_tokens=4096),
     ("tokens", 31999), False),
    ("small budget, enforced by the engine", "messages",
     claude_code(thinking={"type": "enabled", "budget_tokens": 64}, output_config=None), ("tokens", 64), False),
    ("budget just below max_tokens, enforced", "messages",
     claude_code(thinking={"type": "enabled", "budget_tokens": 199}, output_config=None, max_tokens=200),
     ("tokens", 199), False),
    ("background hook: disabled, no tools, json_schema", "messages", background_hook(), ("off",), False),
    ("chat completions: reasoning_effort medium", "chat", chat(reasoning_effort="medium"), ("level", "medium"), False),
    ("chat completions: reasoning_effort none", "chat", chat(reasoning_effort="none"), ("off",), False),
    ("chat completions: nothing", "chat", chat(), ("none",), True),
]


def without_controls(body: dict) -> dict:
    """The same request with no thinking control: the prompt it renders is the reference."""
    bare = copy.deepcopy(body)
    bare.pop("thinking", None)
    bare.pop("reasoning_effort", None)
    if isinstance(bare.get("output_config"), dict):
        bare["output_config"].pop("effort", None)
    return bare


def expected_budget(expect: tuple, max_tokens: int, budgets: dict, reasoning_off: dict) -> int | None:
    """thinking_token_budget the engine must get: None for none, and for off where a switch exists."""
    kind = expect[0]
    if kind == "none":
        return None
    if kind == "off":
        return None if reasoning_off else 0
    tokens = budgets[expect[1]] if kind == "level" else expect[1]
    return tokens if tokens < max_tokens else None  # max_tokens bounds it: no budget to follow
