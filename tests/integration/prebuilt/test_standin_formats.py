"""The stand-in vLLM's SSE lines are byte-identical to what vLLM 0.27.1's own protocol classes serialize.

Runs in the real a40 image (its vllm package; no GPU needed to build pydantic objects): each stand-in
event is rebuilt the way vllm/entrypoints/*/serving.py builds it, and the two strings compared. Marked
slow and skipped when `prebake-offline:a40-vllm0.27.1-cu13.0` is absent (docs/selftest.md builds it).
"""

import json

import pytest

from prebake_testing.servers import STANDIN

pytestmark = [pytest.mark.docker, pytest.mark.slow]


COMPARE = r'''
import json
import standin as s  # /opt/standin/standin.py (PYTHONPATH)
from vllm.entrypoints.openai.chat_completion.protocol import (
    ChatCompletionResponseStreamChoice as ChatChoice, ChatCompletionStreamResponse as ChatChunk)
from vllm.entrypoints.openai.completion.protocol import (
    CompletionResponseStreamChoice as TextChoice, CompletionStreamResponse as TextChunk)
from vllm.entrypoints.openai.engine.protocol import DeltaMessage, ErrorInfo, ErrorResponse
from vllm.entrypoints.anthropic.protocol import (
    AnthropicContentBlock, AnthropicDelta, AnthropicError, AnthropicErrorResponse, AnthropicMessagesResponse,
    AnthropicStreamEvent, AnthropicUsage)

rid, words, T, M = "rid", s.tokens(3), 1764460800, s.MODEL
def data(obj, **kw):
    return f"data: {obj.model_dump_json(exclude_unset=True, **kw)}\n\n"
def event(name, obj):
    return f"event: {name}\ndata: {obj.model_dump_json(exclude_unset=True)}\n\n"

chat = [data(ChatChunk(id=rid, object="chat.completion.chunk", created=T, model=M, prompt_token_ids=None,
                       prompt_text=None, choices=[ChatChoice(index=0, delta=DeltaMessage(role="assistant", content=""),
                                                             logprobs=None, finish_reason=None)]))]
for i, w in enumerate(words):
    last = i == len(words) - 1
    extra = {"stop_reason": None} if last else {}
    chat.append(data(ChatChunk(id=rid, object="chat.completion.chunk", created=T, model=M, choices=[
        ChatChoice(index=0, delta=DeltaMessage(content=w), logprobs=None, finish_reason="stop" if last else None,
                   token_ids=None, **extra)])))
chat.append("data: [DONE]\n\n")

text = [data(TextChunk(id=rid, object="text_completion", created=T, model=M, choices=[
    TextChoice(index=0, text=w, logprobs=None, finish_reason="length" if i == len(words) - 1 else None,
               stop_reason=None, prompt_token_ids=None, token_ids=None)])) for i, w in enumerate(words)]
text.append("data: [DONE]\n\n")

anthropic = [event("message_start", AnthropicStreamEvent(type="message_start", message=AnthropicMessagesResponse(
    id=rid, type="message", role="assistant", content=[], model=M, stop_reason=None, stop_sequence=None,
    usage=AnthropicUsage(input_tokens=0, output_tokens=0)))),
    event("content_block_start", AnthropicStreamEvent(index=0, type="content_block_start",
                                                      content_block=AnthropicContentBlock(type="text", text="")))]
anthropic += [event("content_block_delta", AnthropicStreamEvent(index=0, type="content_block_delta",
                                                                delta=AnthropicDelta(type="text_delta", text=w)))
              for w in words]
anthropic += [event("content_block_stop", AnthropicStreamEvent(index=0, type="content_block_stop")),
              event("message_delta", AnthropicStreamEvent(type="message_delta", delta=AnthropicDelta(
                  stop_reason="end_turn"), usage=AnthropicUsage(input_tokens=12, output_tokens=len(words)))),
              f"event: message_stop\ndata: {AnthropicStreamEvent(type='message_stop').model_dump_json(exclude_unset=True, exclude_none=True)}\n\n"]

# Error bodies: JSONResponse(content=model_dump()) in vLLM's routers, starlette's compact JSON.
def starlette(obj):
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
openai_400 = starlette(ErrorResponse(error=ErrorInfo(message=s.CONTEXT_ERROR, type="BadRequestError",
                                                     param="input_tokens", code=400)).model_dump())
anthropic_400 = starlette(AnthropicErrorResponse(error=AnthropicError(type="BadRequestError",
                                                                      message=s.CONTEXT_ERROR)).model_dump())
ping = AnthropicStreamEvent(type="ping").model_dump_json(exclude_unset=True)

print(json.dumps({
    "chat": [chat, s.chat_stream(rid, words)],
    "completions": [text, s.completion_stream(rid, words)],
    "anthropic": [anthropic, s.anthropic_stream(rid, words)],
    "openai_error": [openai_400, s.compact(s.error("/v1/chat/completions", 400))],
    "anthropic_error": [anthropic_400, s.compact(s.error("/v1/messages", 400))],
    "ping": [ping, '{"type":"ping"}'],
}))
'''


@pytest.mark.parametrize("what", ["chat", "completions", "anthropic", "openai_error", "anthropic_error", "ping"])
def test_standin_sse_is_vllms_own(client, a40, what, compared={}):
    if not compared:
        out = client.containers.run(a40, entrypoint=["/opt/venv/bin/python", "-c", COMPARE], remove=True,
                                    network_disabled=True, environment={"PYTHONPATH": "/opt/standin"},
                                    volumes={str(STANDIN): {"bind": "/opt/standin/standin.py", "mode": "ro"}})
        compared.update(json.loads(out.decode().strip().splitlines()[-1]))
    vllm_side, standin_side = compared[what]
    assert standin_side == vllm_side
