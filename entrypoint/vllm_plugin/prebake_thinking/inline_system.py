"""Claude Code's inline `role: system` messages, folded so that vLLM's prefix cache keeps the conversation.

Claude Code puts system messages inside `messages` (a list of agent types on the first turn, a
reminder every few tool turns). For chat templates that refuse a system message after the first
(Qwen's `loop.first` guard) vLLM 0.27.1 sets merge_inline_system and appends every inline system
text to the LEADING system block, glued with "": a new reminder changes the prompt right after the
tools and the system prompt, and the whole conversation is prefilled again.

Here, where vLLM would merge, each inline system message becomes a `<system-reminder>` text in the
message before it, so no system message comes after the first and the earlier prompt stays
byte-identical: inside the last tool result when that message only returns tool results (a text
block beside them would become a user message of its own, which the Qwen templates take for a new
user prompt: they would drop the reasoning of every earlier assistant turn, and the prefix with it),
else as a text block of the user's turn. One with no user message before it goes into the next
one, and one with no user message around it at the end of the leading system block, after a blank
line. Templates that take late system messages keep vLLM's own in-place conversion.
"""

from __future__ import annotations

from typing import Any

BILLING = "x-anthropic-billing-header"  # vLLM strips these blocks (a per-request hash) itself


def system_text(message: Any) -> str | None:
    """The text of an inline system message as vLLM reads it (billing header blocks dropped)."""
    if isinstance(message.content, str):
        return None if message.content.startswith(BILLING) else message.content
    parts = [block.text for block in message.content
             if block.type == "text" and block.text and not block.text.startswith(BILLING)]
    return "".join(parts) if parts else None


def as_reminder(text: str) -> str:
    """Claude Code's own form for a reminder inside a user message; one it already wrapped stays as is."""
    stripped = text.strip()
    if stripped.startswith("<system-reminder>") and stripped.endswith("</system-reminder>"):
        return stripped
    return f"<system-reminder>\n{stripped}\n</system-reminder>"


def _with_text(message: Any, block_class: type, text: str, first: bool) -> Any:
    """The message with `text` added: into its last tool result when it holds only tool results, else as
    a text block (first or last)."""
    content = message.content
    blocks = [block_class(type="text", text=content)] if isinstance(content, str) else list(content)
    results = [i for i, block in enumerate(blocks) if block.type == "tool_result"]
    if results and all(block.type == "tool_result" for block in blocks):
        index = results[0] if first else results[-1]
        result = blocks[index]
        inner = result.content
        if inner is None or inner == "":
            inner = text
        elif isinstance(inner, str):
            inner = f"{text}\n\n{inner}" if first else f"{inner}\n\n{text}"
        else:
            item = {"type": "text", "text": text}
            inner = [item, *inner] if first else [*inner, item]
        blocks[index] = result.model_copy(update={"content": inner})
        return message.model_copy(update={"content": blocks})
    added = block_class(type="text", text=text)
    return message.model_copy(update={"content": [added, *blocks] if first else [*blocks, added]})


def fold_inline_system(messages: list[Any], block_class: type) -> tuple[list[Any], list[str]]:
    """(messages without role system, reminders for the leading system block); the caller's messages are
    kept: each inline system text is a reminder block of a neighbouring user message where there is one."""
    kept: list[Any] = []
    pending: list[str] = []  # reminders waiting for the next user message
    for message in messages:
        if message.role == "system":
            text = system_text(message)
            if not text:
                continue
            if kept and kept[-1].role == "user":
                kept[-1] = _with_text(kept[-1], block_class, as_reminder(text), first=False)
            else:
                pending.append(as_reminder(text))
            continue
        if pending and message.role == "user":
            for text in reversed(pending):
                message = _with_text(message, block_class, text, first=True)
            pending = []
        kept.append(message)
    return kept, pending


MARK = "_prebake_inline_system_original"


def patch_anthropic_serving(module: Any) -> None:
    """vLLM's merge path, replaced by the fold: `_convert_system_message` and `_convert_messages` of
    AnthropicServingMessages, which its conversion calls with merge_inline_system; without it they are vLLM's."""
    serving, block_class = module.AnthropicServingMessages, module.AnthropicContentBlock
    system_original = serving.__dict__["_convert_system_message"].__func__
    messages_original = serving.__dict__["_convert_messages"].__func__
    if getattr(system_original, MARK, None) is not None:
        return

    def _convert_system_message(cls, anthropic_request, openai_messages, *, merge_inline_system=False):
        system_original(cls, anthropic_request, openai_messages, merge_inline_system=False)
        if not merge_inline_system:
            return
        _, leading = fold_inline_system(list(anthropic_request.messages), block_class)
        if not leading:
            return
        tail = "".join(f"\n\n{text}" for text in leading)
        if openai_messages and openai_messages[-1].get("role") == "system":
            openai_messages[-1]["content"] += tail
        else:
            openai_messages.append({"role": "system", "content": tail.lstrip("\n")})

    def _convert_messages(cls, messages, openai_messages, *, merge_inline_system=False):
        if merge_inline_system:
            messages, _ = fold_inline_system(list(messages), block_class)
        messages_original(cls, messages, openai_messages, merge_inline_system=False)

    setattr(_convert_system_message, MARK, system_original)
    setattr(_convert_messages, MARK, messages_original)
    serving._convert_system_message = classmethod(_convert_system_message)
    serving._convert_messages = classmethod(_convert_messages)
