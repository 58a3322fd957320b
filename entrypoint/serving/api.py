"""What the keep-alive bridge writes itself, per API: heartbeats and error events.

Every other byte comes from vLLM unchanged. The shapes follow vLLM 0.27.1's own serving code:
- OpenAI chat and completions streams end an error as `data: {"error": {...}}` then
  `data: [DONE]` (vllm/entrypoints/openai/chat_completion/serving.py, json.dumps of ErrorResponse);
- Anthropic streams send `event: error` with `{"type":"error","error":{"type","message"}}`
  (vllm/entrypoints/anthropic/serving.py, pydantic's compact JSON), and its SDKs skip `event: ping`;
- vLLM has no working error event for /v1/responses streams, so the bridge sends the Responses
  API's `event: error` fields and, beside them, vLLM's error object under "error", the key that
  makes the openai SDK raise APIError with vLLM's message.
SSE comment lines (": ...") are skipped by every SSE parser, the OpenAI SDK's included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# POST paths that generate, and the API whose streaming format they use.
GENERATION_PATHS = {
    "/v1/chat/completions": "openai",
    "/v1/completions": "openai",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic",
}

def api_of(path: str) -> str:
    """The API whose error format a path's clients read: Anthropic's for /v1/messages and below."""
    return "anthropic" if path == "/v1/messages" or path.startswith("/v1/messages/") else "openai"


# One table of error types per API, by HTTP status: the `type` of every error the bridge answers itself. Anthropic's
# are the types its API documents (docs.claude.com/en/api/errors: 400 invalid_request_error, also for other 4XX;
# 401 authentication_error, 402 billing_error, 403 permission_error, 404 not_found_error, 413 request_too_large,
# 429 rate_limit_error, 500 api_error, 504 timeout_error, 529 overloaded_error, "the API is temporarily overloaded");
# the bridge's 503 (vLLM loading, a swap, the watchdog) is that too. The vLLM plugin answers Anthropic's errors from
# inside vLLM, where this package cannot be imported: its copy (vllm_plugin/prebake_thinking/lengths.py) is checked
# equal to this one by tests/unit/test_claude_code_sessions.py.
ERROR_TYPES: dict[str, dict[int, str]] = {
    "anthropic": {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                  403: "permission_error", 404: "not_found_error", 408: "timeout_error", 413: "request_too_large",
                  422: "invalid_request_error", 429: "rate_limit_error", 500: "api_error", 502: "api_error",
                  503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"},
    "openai": {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               405: "method_not_allowed", 408: "timeout_error", 502: "bad_gateway", 503: "service_unavailable"},
}


def error_type(api: str, status: int) -> str:
    """The `type` of the bridge's error with HTTP `status` in `api`'s answers (the Responses API's: OpenAI's)."""
    table = ERROR_TYPES["anthropic" if api == "anthropic" else "openai"]
    return table.get(status) or ("invalid_request_error" if 400 <= status < 500 else "api_error")


OPENAI_HEARTBEAT = b": keep-alive\n\n"
ANTHROPIC_HEARTBEAT = b'event: ping\ndata: {"type":"ping"}\n\n'
# Non-streaming: whitespace ahead of the JSON body, which every JSON parser skips.
JSON_HEARTBEAT = b"\n"


def heartbeat(api: str, streaming: bool) -> bytes:
    if not streaming:
        return JSON_HEARTBEAT
    return ANTHROPIC_HEARTBEAT if api == "anthropic" else OPENAI_HEARTBEAT


@dataclass(frozen=True)
class UpstreamError:
    """An error to end a request with: vLLM's (parse_error), or the bridge's own (`of_bridge`: its type is the
    request's API's, from ERROR_TYPES, when it is written)."""
    message: str
    type: str | None  # None: the bridge's own error
    code: int
    param: str | None = None
    openai_body: dict | None = None  # vLLM's {"error": {...}} when it sent one
    anthropic_body: dict | None = None  # vLLM's {"type": "error", "error": {...}} when it sent one


    @classmethod
    def of_bridge(cls, message: str, code: int) -> UpstreamError:
        return cls(message, None, code)

    def type_in(self, api: str) -> str:
        return self.type or error_type(api, self.code)


def parse_error(status: int, body: bytes) -> UpstreamError:
    """vLLM's error answer (any shape it sends, or none) as one message, type and code."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        error = data["error"]
        message = str(error.get("message") or f"vLLM answered HTTP {status}")
        kind = str(error.get("type") or "api_error")
        param = error.get("param") if isinstance(error.get("param"), str) else None
        anthropic = data if data.get("type") == "error" else None
        openai = data if anthropic is None else None
        return UpstreamError(message, kind, status, param, openai, anthropic)
    if isinstance(data, dict) and "detail" in data:  # FastAPI's own errors (404, 405)
        return UpstreamError(f"vLLM answered HTTP {status}: {data['detail']}", "api_error", status)
    text = body.decode("utf-8", "replace").strip()[:2000]
    return UpstreamError(f"vLLM answered HTTP {status}" + (f": {text}" if text else ""), "api_error", status)


def error_event(api: str, error: UpstreamError) -> bytes:
    """The error in the API's own streaming format, ending the stream."""
    openai = error.openai_body or {"error": {"message": error.message, "type": error.type_in("openai"),
                                             "param": error.param, "code": error.code}}
    if api == "anthropic":
        body = error.anthropic_body or {"type": "error", "error": {"type": error.type_in(api), "message": error.message}}
        return b"event: error\ndata: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
    if api == "responses":
        body = {"type": "error", "code": error.type_in(api), "message": error.message, "param": error.param,
                "sequence_number": 0, "error": openai["error"]}
        return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"
    return b"data: " + json.dumps(openai).encode() + b"\n\ndata: [DONE]\n\n"


def error_body(api: str, message: str, code: int, kind: str | None = None) -> bytes:
    """A whole JSON error answer in `api`'s shape; kind: vLLM's own error type, else the bridge's (ERROR_TYPES)."""
    kind = kind or error_type(api, code)
    if api == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
