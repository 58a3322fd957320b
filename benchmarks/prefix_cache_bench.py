"""How much of the earlier prompt a recorded Claude Code session prefills again, turn by turn.

    /path/to/vllm-venv/bin/python -m benchmarks.prefix_cache_bench \
        [--session tests/fixtures/claude_code_session.jsonl.xz] [--tokenizer DIR] [--json]

Each request of the recording (benchmarks/claude_session_standin.py made it with the real `claude`
CLI) goes through vLLM 0.27.1's own Anthropic conversion and its OnlineRenderer (the system-first
Qwen template programs/qwen_system_first.jinja, tokenized with DIR's tokenizer.json +
tokenizer_config.json, e.g. a Qwen3 one; without --tokenizer one byte = one token), twice: with
vLLM's own conversion ("vllm") and with the plugin's fold (prebake_thinking/inline_system.py).
Per turn it prints the prompt's length, the tokens to prefill (those after the longest start it
shares with the previous prompt, what vLLM's prefix cache can reuse, before its 16-token block
rounding), the earlier prompt's tokens among them (previous length - shared), and the goal for
those: the previous request's last message plus the generation prompt. Then two things no server can fix, measured on the same
session: a new user prompt after turns with reasoning (the Qwen templates drop earlier reasoning),
and `claude --continue` (a new git snapshot in the system prompt). docs/measurements.md has the figures
("Long Claude Code sessions").
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import lzma
import os
from pathlib import Path

from prebake.incontainer.programs.claude_code_sessions import common_prefix  # the self-test's measure of a kept prefix

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "prebake" / "incontainer" / "programs"

SESSION = REPO / "tests" / "fixtures" / "claude_code_session.jsonl.xz"
TEMPLATE = PROGRAMS / "qwen_system_first.jinja"


def load_session(path: Path) -> list[dict]:
    """The main conversation's request bodies in order (those with tools; background calls have none)."""
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [row["body"] for row in rows if row["body"].get("tools") and "count_tokens" not in row.get("path", "")]


class Prompter:
    """Anthropic request body -> prompt token ids, through vLLM's conversion and OnlineRenderer."""

    def __init__(self, template: Path, tokenizer_dir: str | None):
        from prebake.incontainer.programs.claude_code_sessions import model_dir
        from vllm.config import ModelConfig
        from vllm.entrypoints.anthropic import serving as serving_module
        from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest
        from vllm.renderers.online_renderer import OnlineRenderer
        from vllm.renderers.registry import renderer_from_config
        from types import SimpleNamespace

        from entrypoint.vllm_plugin.prebake_thinking import inline_system

        self.request_class = AnthropicMessagesRequest
        self.serving = serving_module.AnthropicServingMessages
        chat_template = template.read_text(encoding="utf-8")
        self.merge = self.serving._detect_merge_inline_system(chat_template)
        names = ("_convert_system_message", "_convert_messages")
        self.modes = {"vllm": {name: self.serving.__dict__[name] for name in names}}
        inline_system.patch_anthropic_serving(serving_module)
        self.modes["plugin"] = {name: self.serving.__dict__[name] for name in names}
        folder = model_dir(str(template), tokenizer_dir)
        model_config = ModelConfig(model=folder, tokenizer=folder, max_model_len=1 << 20, dtype="float32")
        config = SimpleNamespace(model_config=model_config,
                                 parallel_config=SimpleNamespace(_api_process_rank=0, _api_process_count=1))
        renderer = renderer_from_config(config)
        self.tokenizer = renderer.get_tokenizer()
        self.online = OnlineRenderer(model_config=model_config, renderer=renderer, request_logger=None,
                                     chat_template=chat_template, chat_template_content_format="auto",
                                     enable_auto_tools=True, tool_parser="hermes")

    def tokens(self, body: dict, mode: str) -> list[int]:
        for name, function in self.modes[mode].items():
            setattr(self.serving, name, function)
        request = self.request_class.model_validate(dict(body, max_tokens=1))
        chat = self.serving._convert_anthropic_to_openai_request(request, merge_inline_system=self.merge)
        result = asyncio.run(self.online.render_chat(chat))
        if not isinstance(result, tuple):
            raise SystemExit(f"vLLM refused a request of the session: {result}")
        return list(result[1][0]["prompt_token_ids"])


def goal(prompter: Prompter, previous: dict, mode: str) -> int:
    """The previous request's last message + generation prompt: its length less that of the request
    without its last message (rendered without a generation prompt)."""
    whole = prompter.tokens(previous, mode)
    shorter = dict(previous, messages=previous["messages"][:-1])
    while shorter["messages"] and shorter["messages"][-1]["role"] == "system":
        shorter["messages"] = shorter["messages"][:-1]
    try:
        head = prompter.tokens(shorter, mode)
    except SystemExit:
        return len(whole)
    return len(whole) - common_prefix(whole, head)


def turns(prompter: Prompter, bodies: list[dict], mode: str) -> list[dict]:
    rows, previous = [], None
    for index, body in enumerate(bodies):
        prompt = prompter.tokens(body, mode)
        row = {"turn": index + 1, "prompt": len(prompt),
               "new_system_message": sum(m["role"] == "system" for m in body["messages"])
               > (sum(m["role"] == "system" for m in bodies[index - 1]["messages"]) if index else 0)}
        if previous is not None:
            same = common_prefix(previous, prompt)
            row.update(shared=same, prefilled_again=len(previous) - same, goal=goal(prompter, bodies[index - 1], mode))
        rows.append(row)
        previous = prompt
    return rows


def with_reasoning(body: dict, words: int) -> dict:
    """The request as a reasoning model's session would send it: each assistant turn thought first."""
    body = copy.deepcopy(body)
    for n, message in enumerate(body["messages"]):
        if message["role"] == "assistant" and isinstance(message["content"], list):
            thought = " ".join(f"step{n}-thought{i}" for i in range(words))  # "" for words=0
            message["content"].insert(0, {"type": "thinking", "thinking": thought, "signature": "sig"})
    return body


def scenario_new_prompt(prompter: Prompter, body: dict, mode: str, words: int = 40) -> dict:
    """Tool turns with reasoning, then the user types a new prompt: the template drops the reasoning of
    every assistant turn before it. words=0: thinking blocks sent back empty, as Claude Code does with a
    thinking text the server omitted (thinking.display "omitted", its -p runs since 2.1.332)."""
    before = with_reasoning(body, words)
    after = copy.deepcopy(before)
    after["messages"] += [{"role": "assistant", "content": [{"type": "thinking", "thinking": "done", "signature": "s"},
                                                            {"type": "text", "text": "All steps done."}]},
                          {"role": "user", "content": [{"type": "text", "text": "Now run them again."}]}]
    a, b = prompter.tokens(before, mode), prompter.tokens(after, mode)
    same = common_prefix(a, b)
    return {"previous_prompt": len(a), "prompt": len(b), "shared": same, "prefilled_again": len(a) - same}


def scenario_continue(prompter: Prompter, body: dict, mode: str) -> dict:
    """`claude --continue` in a repository that changed: the same conversation, a new gitStatus snapshot."""
    changed = copy.deepcopy(body)
    for block in changed["system"]:
        if "gitStatus:" in block.get("text", ""):
            block["text"] = block["text"].replace("Status:\n?? README.md", "Status:\nM README.md\n?? notes.md")
    a, b = prompter.tokens(body, mode), prompter.tokens(changed, mode)
    if a == b:
        raise SystemExit("the session's system prompt has no gitStatus snapshot to change")
    same = common_prefix(a, b)
    return {"prompt": len(a), "shared": same, "prefilled_again": len(a) - same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, default=SESSION)
    parser.add_argument("--tokenizer", help="folder with tokenizer.json + tokenizer_config.json (default: bytes)")
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the tables")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    bodies = load_session(args.session)
    prompter = Prompter(args.template, args.tokenizer)
    result = {"session": str(args.session.relative_to(REPO) if args.session.is_relative_to(REPO) else args.session),
              "requests": len(bodies), "tokenizer": args.tokenizer or "bytes", "merge_inline_system": prompter.merge,
              "turns": {mode: turns(prompter, bodies, mode) for mode in ("vllm", "plugin")},
              "new_user_prompt": {mode: scenario_new_prompt(prompter, bodies[-1], mode) for mode in ("vllm", "plugin")},
              "new_user_prompt_thinking_omitted": {mode: scenario_new_prompt(prompter, bodies[-1], mode, words=0)
                                                   for mode in ("vllm", "plugin")},
              "continue": {mode: scenario_continue(prompter, bodies[-1], mode) for mode in ("vllm", "plugin")}}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['session']}: {len(bodies)} requests, tokenizer {result['tokenizer']}, "
          f"vLLM merges inline system messages: {prompter.merge}")
    print("                         |  vLLM 0.27.1 alone       |  with the plugin         |")
    print("turn  prompt  new sys msg |  prefill  earlier again  |  prefill  earlier again  | goal")
    for old, new in zip(result["turns"]["vllm"], result["turns"]["plugin"]):
        if "shared" not in old:
            print(f"{old['turn']:>4} {old['prompt']:>7}  {'':>11} | {old['prompt']:>8} {'':>14} | {new['prompt']:>8}")
            continue
        print(f"{old['turn']:>4} {new['prompt']:>7}  {'yes' if old['new_system_message'] else '':>11} | "
              f"{old['prompt'] - old['shared']:>8} {old['prefilled_again']:>14} | "
              f"{new['prompt'] - new['shared']:>8} {new['prefilled_again']:>14} | {new['goal']:>4}")
    for mode in ("vllm", "plugin"):
        again = [row["prefilled_again"] for row in result["turns"][mode] if "prefilled_again" in row]
        over = sum(max(0, row["prefilled_again"] - row["goal"]) for row in result["turns"][mode] if "goal" in row)
        print(f"{mode}: earlier-prompt tokens prefilled again, all turns: {sum(again)}; beyond the goal: {over}")
    for name in ("new_user_prompt", "new_user_prompt_thinking_omitted", "continue"):
        print(f"{name}: " + "; ".join(f"{mode} {json.dumps(value)}" for mode, value in result[name].items()))


if __name__ == "__main__":
    main()
