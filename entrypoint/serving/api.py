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
    message: str
    type: str
    code: int
    param: str | None = None
    openai_body: dict | None = None  # vLLM's {"error": {...}} when it sent one
    anthropic_body: dict | None = None  # vLLM's {"type": "error", "error": {...}} when it sent one


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
    openai = error.openai_body or {"error": {"message": error.message, "type": error.type, "param": error.param,
                                             "code": error.code}}
    if api == "anthropic":
        body = error.anthropic_body or {"type": "error", "error": {"type": error.type, "message": error.message}}
        return b"event: error\ndata: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
    if api == "responses":
        body = {"type": "error", "code": error.type, "message": error.message, "param": error.param,
                "sequence_number": 0, "error": openai["error"]}
        return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"
    return b"data: " + json.dumps(openai).encode() + b"\n\ndata: [DONE]\n\n"


def error_body(api: str, message: str, kind: str, code: int) -> bytes:
    """A whole JSON error answer from the bridge itself (vLLM loading or unreachable)."""
    if api == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
