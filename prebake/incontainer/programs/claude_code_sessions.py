"""Long Claude Code sessions through vLLM's own /v1/messages server code, with the plugins vLLM loads; no GPU.

    python claude_code_sessions.py

vLLM 0.27.1's real AnthropicServingMessages and OpenAIServingChat, its HfRenderer rendering a
system-first Qwen chat template (qwen_system_first.jinja, beside this file) over a byte-level
tokenizer made here, its /v1/messages and /v1/chat/completions routers and the exception handlers
its build_app registers, driven over HTTP in-process; only the engine is a stand-in (it records
the prompt tokens and max_tokens it is given and generates max_tokens tokens). Cases:
- prefix: a tool turn that brings a new inline system message (Claude Code's "task tools"
  reminder) leaves the previous prompt byte-identical up to its generation prompt (the earlier
  turns' reasoning included: the template keeps it until a new user prompt), the reminder is a
  <system-reminder> text, and no system message follows the first;
- in place: for a template that takes late system messages, the conversion is vLLM's own;
- lengths: prompt fits but prompt + max_tokens does not -> 200 with max_tokens lowered to what
  fits (stop_reason max_tokens, usage counted); prompt too long -> 400 invalid_request_error
  "prompt is too long: N tokens > L maximum" with N the real length; count_tokens counts a prompt
  over the context; a body that fails validation -> 400 with an Anthropic error body;
  /v1/chat/completions answers no 5xx for these.
Prints one JSON object {"ok": bool, "plugin": ..., "results": [{"case", "ok", "detail"}]} on its
last line; exit status 1 when a case fails. With VLLM_PLUGINS=none it shows what vLLM does alone.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_FIRST = os.path.join(HERE, "qwen_system_first.jinja")
MODEL = "claude-opus-4-8"  # a name Claude Code sends; served here under it
CONTEXT = 40000  # max_model_len of the stand-in model (above Claude Code's max_tokens); tokens are bytes
SPECIALS = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>"]
REMINDER = ("The task tools haven't been used recently. If you're working on tasks that would benefit from "
            "tracking progress, consider using the task tools.")
AGENTS = "Available agent types for the Agent tool:\n- general-purpose: any task"


def model_dir(template: str, tokenizer_dir: str | None = None) -> str:
    """A model folder vLLM's ModelConfig accepts: a tiny Qwen3 config, a tokenizer (a byte-level one made
    here, or the one in tokenizer_dir: tokenizer.json + tokenizer_config.json), the template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = tempfile.mkdtemp(prefix="prebake-sessions-")
    if tokenizer_dir:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    else:
        vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
        core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
        core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        core.decoder = decoders.ByteLevel()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                            additional_special_tokens=[s for s in SPECIALS if s != "<|im_end|>"])
    with open(template, encoding="utf-8") as f:
        tokenizer.chat_template = f.read()
    tokenizer.save_pretrained(folder)
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 32, "vocab_size": len(tokenizer), "max_position_embeddings": 1 << 20,
              "rms_norm_eps": 1e-6, "rope_theta": 1e6, "torch_dtype": "float32", "tie_word_embeddings": True,
              "eos_token_id": tokenizer.eos_token_id}
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return folder


class StandInEngine:
    """The engine client the serving classes call: records each prompt and its max_tokens, then
    'generates' max_tokens tokens (the letter a), finished by length."""

    errored = False
    dead_error = RuntimeError("the stand-in engine never dies")
    vllm_config = None
    input_processor = None

    def __init__(self, model_config, renderer):
        self.model_config, self.renderer = model_config, renderer
        self.calls: list[dict] = []

    async def is_tracing_enabled(self) -> bool:
        return False

    async def generate(self, prompt, sampling_params, request_id, **kwargs):
        from vllm.outputs import CompletionOutput, RequestOutput

        token_ids = list(prompt["prompt_token_ids"])
        self.calls.append({"prompt_token_ids": token_ids, "max_tokens": sampling_params.max_tokens})
        count = sampling_params.max_tokens
        output = CompletionOutput(index=0, text="a" * count, token_ids=[65] * count, cumulative_logprob=None,
                                  logprobs=None, finish_reason="length")
        yield RequestOutput(request_id=request_id, prompt=None, prompt_token_ids=token_ids, prompt_logprobs=None,
                            outputs=[output], finished=True)


def build_app(template: str, max_model_len: int):
    """vLLM's serving objects as init_app_state makes them, its routers and build_app's exception handlers."""
    from fastapi import FastAPI, HTTPException
    from fastapi.exceptions import RequestValidationError
    from vllm.config import ModelConfig
    from vllm.entrypoints.anthropic import api_router as anthropic_router
    from vllm.entrypoints.anthropic.serving import AnthropicServingMessages
    from vllm.entrypoints.openai import api_server
    from vllm.entrypoints.openai.chat_completion import api_router as chat_router
    from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat
    from vllm.entrypoints.openai.models.protocol import BaseModelPath
    from vllm.entrypoints.openai.models.serving import OpenAIServingModels
    from vllm.exceptions import VLLMError
    from vllm.renderers.online_renderer import OnlineRenderer
    from vllm.renderers.registry import renderer_from_config

    folder = model_dir(template)
    model_config = ModelConfig(model=folder, tokenizer=folder, max_model_len=max_model_len, dtype="float32")
    # What BaseRenderer reads of a VllmConfig (a whole one needs a GPU platform).
    config = SimpleNamespace(model_config=model_config,
                             parallel_config=SimpleNamespace(_api_process_rank=0, _api_process_count=1))
    renderer = renderer_from_config(config)
    engine = StandInEngine(model_config, renderer)
    with open(template, encoding="utf-8") as f:
        chat_template = f.read()
    common = dict(request_logger=None, chat_template=chat_template, chat_template_content_format="auto")
    tools = dict(enable_auto_tools=True, tool_parser="hermes")
    online = OnlineRenderer(model_config=model_config, renderer=renderer, **common, **tools)
    models = OpenAIServingModels(engine_client=engine, base_model_paths=[BaseModelPath(name=MODEL, model_path=folder)])
    app = FastAPI()
    app.state.args = SimpleNamespace(log_error_stack=False)
    app.state.openai_serving_models = models
    app.state.anthropic_serving_messages = AnthropicServingMessages(
        engine, models, "assistant", online_renderer=online, **common, **tools)
    app.state.openai_serving_chat = OpenAIServingChat(engine, models, "assistant", online_renderer=online,
                                                      **common, **tools)
    anthropic_router.attach_router(app)
    chat_router.attach_router(app)
    # Registered as api_server.build_app registers them, read from that module where a plugin may wrap them.
    app.exception_handler(HTTPException)(api_server.http_exception_handler)
    app.exception_handler(RequestValidationError)(api_server.validation_exception_handler)
    app.exception_handler(VLLMError)(api_server.vllm_error_handler)
    for kind in (ValueError, TypeError, OverflowError, NotImplementedError, Exception):
        app.exception_handler(kind)(api_server.exception_handler)
    return app, engine, app.state.anthropic_serving_messages


# --- a Claude Code conversation, in its own shapes ---------------------------------------------------

def claude_code_request(turns: int, reminder_at: set[int], max_tokens: int = 32000, pad: int = 0) -> dict:
    """Claude Code's request after `turns` Bash tool calls: system blocks with the billing header, the
    agent list as an inline system message, tool turns, and an inline reminder after those in reminder_at."""
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Run the steps." + "x" * pad}]},
                            {"role": "system", "content": AGENTS}]
    for turn in range(1, turns + 1):
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"Step {turn} is next; Bash runs it.", "signature": "s"},
            {"type": "text", "text": f"Running step {turn}."},
            {"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash", "input": {"command": f"echo step {turn}"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}", "content": f"step {turn}"}]})
        if turn in reminder_at:
            messages.append({"role": "system", "content": REMINDER})
    return {"model": MODEL, "max_tokens": max_tokens, "stream": False,
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197; cch=1234;"},
                       {"type": "text", "text": "You are Claude Code, a coding agent."}],
            "tools": [{"name": "Bash", "description": "Run a shell command",
                       "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                                        "required": ["command"]}}],
            "messages": messages}


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# --- the cases -----------------------------------------------------------------------------------

def case_prefix(client, engine, tokenizer) -> str | None:
    prompts = []
    for turns, reminders in ((6, set()), (7, {7})):  # the 7th tool turn brings the reminder
        reply = client.post("/v1/messages", json=claude_code_request(turns, reminders, max_tokens=64))
        if reply.status_code != 200:
            return f"turn {turns}: HTTP {reply.status_code} {reply.text[:300]}"
        prompts.append(engine.calls[-1]["prompt_token_ids"])
    before, after = prompts
    generation = len(tokenizer.encode("<|im_start|>assistant\n<think>\n", add_special_tokens=False))
    kept = common_prefix(before, after)
    if kept < len(before) - generation:
        text = tokenizer.decode(before[kept:kept + 60])
        return (f"the new reminder changed the earlier prompt at token {kept} of {len(before)} (only the last "
                f"{generation}, the generation prompt, may change): ...{text!r}")
    rendered = tokenizer.decode(after)
    if f"<system-reminder>\n{REMINDER}\n</system-reminder>" not in rendered:
        return "the reminder is not in the prompt as a <system-reminder> text"
    if rendered.count("<|im_start|>system") != 1:
        return f"{rendered.count('<|im_start|>system')} system blocks in the prompt, not one"
    if f"{AGENTS}\n\n" not in rendered and f"{AGENTS}\n</system-reminder>" not in rendered:
        return "the agent list is glued to the text around it"
    return None


def case_in_place(serving_class) -> str | None:
    """merge_inline_system False (a template that takes late system messages): vLLM's own conversion."""
    from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest

    request = AnthropicMessagesRequest.model_validate(claude_code_request(7, {7}))
    converted = serving_class._convert_anthropic_to_openai_request(request, merge_inline_system=False)
    late = [m for m in converted.messages[1:] if m.get("role") == "system"]
    if [m.get("content") for m in late] != [AGENTS, REMINDER]:
        return f"the inline system messages are not kept in place: {late}"
    return None


def case_lowered(client, engine) -> str | None:
    body = claude_code_request(2, set(), max_tokens=32000, pad=12000)
    for stream in (False, True):
        reply = client.post("/v1/messages", json=dict(body, stream=stream))
        if reply.status_code != 200:
            return f"stream {stream}: HTTP {reply.status_code} {reply.text[:300]}"
        call = engine.calls[-1]
        prompt, room = len(call["prompt_token_ids"]), CONTEXT - len(call["prompt_token_ids"])
        if call["max_tokens"] != room:
            return f"stream {stream}: the engine got max_tokens {call['max_tokens']}, not the {room} that fit"
        stop_reason, usage = stream_end(reply.text) if stream else (reply.json().get("stop_reason"),
                                                                    reply.json().get("usage") or {})
        if stop_reason != "max_tokens" or usage.get("output_tokens") != room \
                or (not stream and usage.get("input_tokens") != prompt):
            return f"stream {stream}: stop_reason {stop_reason}, usage {usage}: not what was generated"
    return None


def stream_end(text: str) -> tuple[str | None, dict]:
    """(stop_reason, usage) of the message_delta event of an Anthropic stream."""
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines.get("event") == "message_delta":
            data = json.loads(lines["data"])
            return data.get("delta", {}).get("stop_reason"), data.get("usage") or {}
    return None, {"stream": text[-300:]}


def case_too_long(client, engine, big_client, big_engine) -> str | None:
    body = claude_code_request(2, set(), max_tokens=32000, pad=CONTEXT + 5000)
    counted = big_client.post("/v1/messages", json=dict(body, max_tokens=1))
    if counted.status_code != 200:
        return f"the same prompt on a large context: HTTP {counted.status_code} {counted.text[:200]}"
    real = len(big_engine.calls[-1]["prompt_token_ids"])
    want = f"prompt is too long: {real} tokens > {CONTEXT} maximum"
    for stream in (False, True):
        reply = client.post("/v1/messages", json=dict(body, stream=stream))
        data = _json(reply)
        error = data.get("error") or {}
        if reply.status_code != 400 or data.get("type") != "error" or error.get("type") != "invalid_request_error" \
                or error.get("message") != want:
            return (f"stream {stream}: HTTP {reply.status_code} {json.dumps(data)[:300]}; "
                    f"expected 400 invalid_request_error {want!r}")
    return None


def case_count(client, big_client, big_engine) -> str | None:
    body = claude_code_request(2, set(), max_tokens=1, pad=CONTEXT + 5000)
    if big_client.post("/v1/messages", json=body).status_code != 200:
        return "the prompt could not be served on a large context"
    real = len(big_engine.calls[-1]["prompt_token_ids"])
    reply = client.post("/v1/messages/count_tokens", json={k: body[k] for k in ("model", "messages", "system", "tools")})
    data = _json(reply)
    if reply.status_code != 200 or data.get("input_tokens") != real:
        return f"HTTP {reply.status_code} {json.dumps(data)[:300]}; expected 200 with input_tokens {real}"
    return None


def case_validation(client) -> str | None:
    body = claude_code_request(1, set())
    del body["max_tokens"]
    reply = client.post("/v1/messages", json=body)
    data = _json(reply)
    if reply.status_code != 400 or data.get("type") != "error" \
            or (data.get("error") or {}).get("type") != "invalid_request_error":
        return f"a body without max_tokens: HTTP {reply.status_code} {json.dumps(data)[:300]}"
    return None


def case_chat(client) -> str | None:
    problems = []
    for label, pad, max_tokens in (("prompt + max_tokens over", 12000, 32000), ("prompt over", CONTEXT + 5000, 16)):
        body = {"model": MODEL, "max_tokens": max_tokens, "messages": [
            {"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "x" * pad}]}
        for stream in (False, True):
            reply = client.post("/v1/chat/completions", json=dict(body, stream=stream))
            if reply.status_code >= 500:
                problems.append(f"{label}, stream {stream}: HTTP {reply.status_code} {reply.text[:200]}")
    return "; ".join(problems) or None


def _json(reply) -> dict:
    try:
        data = reply.json()
    except ValueError:
        return {"body": reply.text[:300]}
    return data if isinstance(data, dict) else {"body": data}


def main() -> int:
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # what `vllm serve` does before it builds the server
    from fastapi.testclient import TestClient
    from vllm.entrypoints.anthropic.serving import AnthropicServingMessages

    loaded = "prebake_thinking.hooks" in sys.modules
    app, engine, serving = build_app(SYSTEM_FIRST, CONTEXT)
    big_app, big_engine, _ = build_app(SYSTEM_FIRST, 1 << 20)
    tokenizer = engine.renderer.get_tokenizer()
    results = []
    with TestClient(app, raise_server_exceptions=False) as client, \
            TestClient(big_app, raise_server_exceptions=False) as big_client:
        cases = [
            ("the system-first template makes vLLM merge inline system messages",
             lambda: None if serving._merge_inline_system else "vLLM does not merge for this template"),
            ("prefix kept when a reminder arrives", lambda: case_prefix(client, engine, tokenizer)),
            ("late system messages in place where the template takes them",
             lambda: case_in_place(AnthropicServingMessages)),
            ("prompt fits, prompt + max_tokens does not: max_tokens lowered", lambda: case_lowered(client, engine)),
            ("prompt too long: 400 prompt is too long",
             lambda: case_too_long(client, engine, big_client, big_engine)),
            ("count_tokens over the context: counted", lambda: case_count(client, big_client, big_engine)),
            ("invalid body: 400 with an Anthropic error", lambda: case_validation(client)),
            ("chat completions: no 5xx near the limit", lambda: case_chat(client)),
        ]
        for name, run in cases:
            try:
                problem = run()
            except Exception as err:  # a crash is a failed case, with its reason
                problem = f"{err.__class__.__name__}: {err}"
            results.append({"case": name, "ok": problem is None, "detail": problem or "ok"})
    ok = all(item["ok"] for item in results)
    print(json.dumps({"ok": ok, "plugin": "loaded" if loaded else "not loaded", "context": CONTEXT,
                      "results": results}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
