"""`thinking.display` "omitted" or "updates" on /v1/messages: the model thinks, its text is not returned.

Anthropic's semantics (thinking, "display"): with `omitted` the response still carries its thinking
blocks, with an empty `thinking` text and their signature; streamed, a thinking block starts, gets
its signature_delta and stops, with no thinking_delta in between. With `updates` only the short progress
notes a model writes between tool calls carry text, its reasoning blocks stay empty: an open model writes no
such notes, so it is `omitted` here. Claude Code 2.1.332 asks for `omitted` in `-p` runs and `updates`
interactively. vLLM 0.27.1 drops `display` and returns every reasoning token as text; Claude Code then sends
it back, and the Qwen templates drop it again at the next user prompt, so the turns since the previous
prompt were prefilled again (docs/measurements.md).

The stream is filtered on its serialised events without parsing them: vLLM writes each one with
pydantic's compact JSON, in which a thinking delta is the only event holding the exact bytes below
(a `"` inside a text is escaped, so no model output can forge them).
"""

from __future__ import annotations

from typing import Any, AsyncIterator

WITHOUT_TEXT = frozenset({"omitted", "updates"})  # the displays whose reasoning blocks come back empty
THINKING_DELTA = '"delta":{"type":"thinking_delta"'


def display_of(request: Any) -> str | None:
    thinking = getattr(request, "thinking", None)
    extra = getattr(thinking, "model_extra", None) or {}
    display = getattr(thinking, "display", None) or extra.get("display")
    return display if isinstance(display, str) else None


async def without_thinking_text(events: AsyncIterator[str]) -> AsyncIterator[str]:
    async for event in events:
        if THINKING_DELTA not in event:
            yield event


def omit_thinking_text(result: Any) -> Any:
    """What create_messages returns (an event stream, a response, an error), its thinking text emptied."""
    if hasattr(result, "__aiter__"):
        return without_thinking_text(result)
    for block in getattr(result, "content", None) or []:
        if getattr(block, "type", None) == "thinking":
            block.thinking = ""
    return result


def patch_anthropic_serving(module: Any) -> None:
    serving = module.AnthropicServingMessages
    original = serving.create_messages
    if getattr(original, "_prebake_display_original", None) is not None:
        return

    async def create_messages(self, request, *args, **kwargs):
        result = await original(self, request, *args, **kwargs)
        return omit_thinking_text(result) if display_of(request) in WITHOUT_TEXT else result

    create_messages._prebake_display_original = original
    serving.create_messages = create_messages
