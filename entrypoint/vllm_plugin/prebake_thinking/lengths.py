"""/v1/messages near the context limit: served with fewer output tokens, or a 400 Claude Code compacts on.

vLLM 0.27.1 checks `prompt + max_tokens <= max_model_len` while it tokenizes (renderers/params.py,
max_input_tokens = max_model_len - max_tokens), before get_max_tokens would lower max_tokens to
what fits; the VLLMValidationError it raises leaves the /v1/messages route as a 500
`internal_error`. Claude Code sends max_tokens 32000-64000 and retries a 5xx for ever, so a long
session dead-ends. Here, for /v1/messages only:
- a prompt that fits leaves max_tokens to get_max_tokens (lowered to the room left; the stop
  reason says `max_tokens` when it is used up, usage counts what was generated);
- a prompt that does not leave room for one token is a 400 `invalid_request_error`
  "prompt is too long: N tokens > L maximum", N counted in full (vLLM stops counting at the limit),
  the form on which Claude Code compacts the conversation;
- every other client error is a 400-class answer with an Anthropic error body, also the ones the
  app's exception handlers give (a body that fails validation), instead of OpenAI's shape or a 500.
/v1/chat/completions keeps vLLM's behaviour (a 400 for these cases).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
from http import HTTPStatus
from typing import Any

ROUTES = ("/v1/messages",)  # and below it: /v1/messages/count_tokens
MARK = "_prebake_lengths_original"
# "fit": tokenize with room for one output token; "count": tokenize without any limit.
_MODE: contextvars.ContextVar[str | None] = contextvars.ContextVar("prebake_messages_lengths", default=None)

# A copy of the bridge's table (entrypoint/serving/api.py ERROR_TYPES["anthropic"], Anthropic's documented types):
# this package runs inside vLLM, where the entrypoint package is not importable. tests/unit/test_claude_code_sessions.py
# checks the two are equal.
ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                   403: "permission_error", 404: "not_found_error", 408: "timeout_error", 413: "request_too_large",
                   422: "invalid_request_error", 429: "rate_limit_error", 500: "api_error", 502: "api_error",
                   503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"}


def anthropic_type(status: int) -> str:
    return ANTHROPIC_TYPES.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")


def too_long_message(prompt_tokens: int, max_model_len: int) -> str:
    """Anthropic's wording, which Claude Code 2.1.x matches (`prompt is too long[^0-9]*(\\d+) tokens > (\\d+)`)
    and compacts on; it compacts by N - L, so a prompt of exactly L is said to exceed L - 1."""
    limit = max_model_len if prompt_tokens > max_model_len else max_model_len - 1
    return f"prompt is too long: {prompt_tokens} tokens > {limit} maximum"


def _is_prompt_length_error(err: BaseException) -> bool:
    return getattr(err, "parameter", None) in ("input_tokens", "input_text")


def patch_chat_protocol(module: Any) -> None:
    """ChatCompletionRequest.build_tok_params, inside a /v1/messages call only: the prompt's limit is
    the whole context less one token (fit), or none (count)."""
    request_class = module.ChatCompletionRequest
    original = request_class.build_tok_params
    if getattr(original, MARK, None) is not None:
        return

    def build_tok_params(self, model_config):
        mode = _MODE.get()
        if mode is None:
            return original(self, model_config)
        params = original(self.model_copy(update={"max_tokens": 1, "max_completion_tokens": 1}), model_config)
        return params if mode == "fit" else dataclasses.replace(params, max_total_tokens=None, max_output_tokens=0)

    setattr(build_tok_params, MARK, original)
    request_class.build_tok_params = build_tok_params


def patch_anthropic_serving(module: Any) -> None:
    """AnthropicServingMessages.create_messages (and count_tokens) answer a client error with an Anthropic
    error body; count_tokens counts a prompt of any length."""
    serving = module.AnthropicServingMessages
    original = serving.create_messages
    original_count = serving.count_tokens
    if getattr(original, MARK, None) is not None:
        return
    from vllm.entrypoints.openai.engine.protocol import ErrorInfo, ErrorResponse
    from vllm.entrypoints.serve.utils.error_response import create_error_response

    def anthropic_error(status: int, message: str, param: str | None = None):
        return ErrorResponse(error=ErrorInfo(message=message, type=anthropic_type(status), code=status, param=param))

    async def prompt_tokens(self, request) -> int | None:
        """The prompt's full length, as count_tokens renders it, with no limit on the tokenizer."""
        token = _MODE.set("count")
        try:
            counted = await original_count(self, request)
        except Exception:
            return None
        finally:
            _MODE.reset(token)
        return getattr(counted, "input_tokens", None)

    async def create_messages(self, request, raw_request=None):
        token = _MODE.set("fit")
        try:
            result = await original(self, request, raw_request)
        except Exception as err:  # what the route would answer with a 500 `internal_error`
            answer = create_error_response(err)
            status = int(answer.error.code)
            if status >= 500:
                raise
            if _is_prompt_length_error(err):
                limit = self.model_config.max_model_len
                counted = await prompt_tokens(self, request)
                value = getattr(err, "value", None)
                tokens = counted if counted is not None else (value if isinstance(value, int) else limit + 1)
                return anthropic_error(400, too_long_message(tokens, limit), getattr(err, "parameter", None))
            return anthropic_error(status, answer.error.message, answer.error.param)
        finally:
            _MODE.reset(token)
        if isinstance(result, ErrorResponse) and not str(result.error.type).endswith("_error"):
            return anthropic_error(int(result.error.code), result.error.message, result.error.param)
        return result

    original_count = serving.count_tokens

    async def count_tokens(self, request, raw_request=None):
        """Counted without a limit (a prompt over the context is what a client counts before trimming);
        a client error is an Anthropic error body, not the route's 500."""
        token = _MODE.set("count")
        try:
            result = await original_count(self, request, raw_request)
        except Exception as err:
            answer = create_error_response(err)
            if int(answer.error.code) >= 500:
                raise
            return anthropic_error(int(answer.error.code), answer.error.message, answer.error.param)
        finally:
            _MODE.reset(token)
        if isinstance(result, ErrorResponse) and not str(result.error.type).endswith("_error"):
            return anthropic_error(int(result.error.code), result.error.message, result.error.param)
        return result

    setattr(create_messages, MARK, original)
    setattr(count_tokens, MARK, original_count)
    serving.create_messages = create_messages
    serving.count_tokens = count_tokens


def _on_messages_route(request: Any) -> bool:
    path = request.url.path
    return any(path == route or path.startswith(route + "/") for route in ROUTES)


def as_anthropic_handler(handler: Any) -> Any:
    """An app exception handler whose answer on /v1/messages has Anthropic's error shape, same status."""
    if getattr(handler, MARK, None) is not None:
        return handler

    async def anthropic_shaped(request, exc):
        response = await handler(request, exc)
        if not _on_messages_route(request):
            return response
        from fastapi.responses import JSONResponse

        try:
            body = json.loads(bytes(response.body))
            message = (body.get("error") or {}).get("message") or str(body)
        except (ValueError, AttributeError):
            message = HTTPStatus(response.status_code).phrase
        status = response.status_code
        return JSONResponse(status_code=status, content={
            "type": "error", "error": {"type": anthropic_type(status), "message": message}})

    setattr(anthropic_shaped, MARK, handler)
    anthropic_shaped.__name__ = getattr(handler, "__name__", "handler")
    return anthropic_shaped


HANDLERS = ("http_exception_handler", "validation_exception_handler", "vllm_error_handler", "exception_handler")


def patch_handlers(module: Any) -> None:
    """The handlers build_app registers, where it reads them (api_server) and where they are defined."""
    for name in HANDLERS:
        if hasattr(module, name):
            setattr(module, name, as_anthropic_handler(getattr(module, name)))
