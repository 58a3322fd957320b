"""A stand-in for vLLM 0.27.1's HTTP server: `standin.py --port N [--host H]`, or as `vllm serve ... --port N`.

It answers like vLLM on the paths the bridge cares about, with vLLM's exact SSE shapes (taken from
vllm/entrypoints/{openai,anthropic}/ in the 0.27.1 wheel: compact pydantic JSON, `data: ...\\n\\n`,
`data: [DONE]`, Anthropic `event: X` lines, Responses' created/in_progress sent before the prefill),
and delays its first body byte on request. Each request is steered by headers:
  x-standin-id       a name for the event log
  x-standin-delay    seconds before the first token (streaming) or the whole answer
  x-standin-error    an HTTP status: after the delay, vLLM's error answer instead of tokens
  x-standin-chunks   number of tokens to stream (default 4); x-standin-gap seconds between them
  x-standin-pad      bytes each token is padded to (vLLM-sized or larger events)
  x-standin-break    "1": after the delay and the tokens, the connection breaks off (no end of the body)
  x-standin-record   "0": keep no copy of the body (benchmarks)
GET /_standin/echo answers the headers and body length it received.
With STANDIN_SAY set, every answer is its text (`./build.py try` says there that no model is behind the pod).
With STANDIN_STRICT_NAMES=1 in its environment it checks `model` against its --served-model-name list as
vLLM does (404 "The model `X` does not exist."); every "done" event names the model the request sent.
GET /_standin/events lists what happened to each request: "done" with the exact bytes sent, or
"cancelled" when the client (the bridge) went away first, which is what vLLM's abort sees.
With STANDIN_KEEP_REQUESTS=1 it keeps each /v1/ request as vLLM got it: GET /_standin/requests lists
{"id", "path", "session" (X-Claude-Code-Session-Id), "request" (the parsed body)}.
With STANDIN_PREFIX_CACHE=1, /v1/messages streams carry usage as vLLM's does with --enable-prompt-tokens-details:
the prompt (tools, system, messages as JSON text) counts one token per 4 bytes, and the tokens it shares from
its start with one of the last 8 prompts, in 16-token blocks, are `cache_read_input_tokens` of the final
message_delta (message_start has the whole prompt as input_tokens, as vLLM's first chunk has no details).
GET /_standin/active lists the requests it holds now (head received, answer not finished: id, path, body
bytes so far), so that a test waits for a request to be in instead of sleeping.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

CONTEXT_ERROR = ("This model's maximum context length is 1024 tokens. However, you requested 16 output tokens "
                 "and your prompt contains 5000 input tokens, for a total of 5016 tokens. Please reduce the length "
                 "of the input prompt or the number of requested output tokens.")
MODEL = "ornith"
SERVED: list[str] = []  # every --served-model-name; checked with STANDIN_STRICT_NAMES=1


def compact(data) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def tokens(count: int) -> list[str]:
    said = os.environ.get("STANDIN_SAY", "").split()
    return [f"{word} " for word in said] if said else [f"tok{i} " for i in range(count)]


# --- streaming bodies, one string per write, as vLLM's generators yield them -------------------------
def chat_stream(rid: str, words: list[str]) -> list[str]:
    head = {"id": rid, "object": "chat.completion.chunk", "created": 1764460800, "model": MODEL}
    out = [compact({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                         "finish_reason": None}], "prompt_token_ids": None, "prompt_text": None})]
    for i, word in enumerate(words):
        last = i == len(words) - 1
        choice = {"index": 0, "delta": {"content": word}, "logprobs": None, "finish_reason": "stop" if last else None}
        if last:
            choice["stop_reason"] = None
        choice["token_ids"] = None
        out.append(compact({**head, "choices": [choice]}))
    return [f"data: {line}\n\n" for line in out] + ["data: [DONE]\n\n"]


def completion_stream(rid: str, words: list[str]) -> list[str]:
    head = {"id": rid, "object": "text_completion", "created": 1764460800, "model": MODEL}
    out = []
    for i, word in enumerate(words):
        last = i == len(words) - 1
        out.append(compact({**head, "choices": [{"index": 0, "text": word, "logprobs": None,
                                                 "finish_reason": "length" if last else None, "stop_reason": None,
                                                 "prompt_token_ids": None, "token_ids": None}]}))
    return [f"data: {line}\n\n" for line in out] + ["data: [DONE]\n\n"]


def common_prefix(a: bytes, b: bytes) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # slices compared in C: a few dozen comparisons for megabytes
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def rendered(value):
    """What a chat template renders of a request's part: no cache_control marks, a one-text-block content as text."""
    if isinstance(value, list):
        return [rendered(item) for item in value]
    if not isinstance(value, dict):
        return value
    content = value.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) \
            and content[0].get("type") == "text":
        value = {**value, "content": content[0].get("text")}
    return {key: rendered(item) for key, item in value.items() if key != "cache_control"}


class PrefixCache:
    """A stand-in for vLLM's prefix cache: 4 bytes of the rendered prompt's JSON text a token, 16-token blocks."""

    def __init__(self) -> None:
        self.prompts: list[bytes] = []

    def usage(self, request: dict) -> tuple[int, int]:
        text = json.dumps(rendered([request.get("tools"), request.get("system"), request.get("messages")])).encode()
        shared = max((common_prefix(text, earlier) for earlier in self.prompts), default=0)
        self.prompts = (self.prompts + [text])[-8:]
        return len(text) // 4, (shared // 4) // 16 * 16


def anthropic_stream(rid: str, words: list[str], prompt: tuple[int, int] | None = None) -> list[str]:
    def event(name: str, data: dict) -> str:
        return f"event: {name}\ndata: {compact(data)}\n\n"
    final = {"input_tokens": 12, "output_tokens": len(words)}
    if prompt:
        final = {"input_tokens": prompt[0] - prompt[1], "output_tokens": len(words), "cache_read_input_tokens": prompt[1]}
    out = [event("message_start", {"type": "message_start", "message": {
        "id": rid, "type": "message", "role": "assistant", "content": [], "model": MODEL, "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": prompt[0] if prompt else 0, "output_tokens": 0}}}),
        event("content_block_start", {"type": "content_block_start", "content_block": {"type": "text", "text": ""},
                                      "index": 0})]
    out += [event("content_block_delta", {"type": "content_block_delta", "delta": {"type": "text_delta", "text": w},
                                          "index": 0}) for w in words]
    out += [event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": final}),
            event("message_stop", {"type": "message_stop"})]
    return out


def responses_head(rid: str) -> list[str]:
    """What vLLM's /v1/responses stream sends BEFORE the prefill: created, then in_progress."""
    response = {"id": rid, "created_at": 1764460800, "model": MODEL, "object": "response", "output": [],
                "status": "in_progress", "usage": None}
    return [f"event: {kind}\ndata: {compact({'type': kind, 'sequence_number': n, 'response': response})}\n\n"
            for n, kind in enumerate(("response.created", "response.in_progress"))]


def responses_tail(rid: str, words: list[str]) -> list[str]:
    item = {"id": "msg_" + rid, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    events = [{"type": "response.output_item.added", "item": item, "output_index": 0},
              {"type": "response.content_part.added", "content_index": 0, "item_id": item["id"], "output_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}]
    events += [{"type": "response.output_text.delta", "content_index": 0, "delta": w, "item_id": item["id"],
                "output_index": 0, "logprobs": []} for w in words]
    text = "".join(words)
    part = {"type": "output_text", "text": text, "annotations": []}
    done_item = {**item, "status": "completed", "content": [part]}
    events += [{"type": "response.output_text.done", "content_index": 0, "item_id": item["id"], "output_index": 0,
                "text": text, "logprobs": []},
               {"type": "response.content_part.done", "content_index": 0, "item_id": item["id"], "output_index": 0,
                "part": part},
               {"type": "response.output_item.done", "item": done_item, "output_index": 0},
               {"type": "response.completed", "response": {
                   "id": rid, "created_at": 1764460800, "model": MODEL, "object": "response", "output": [done_item],
                   "status": "completed", "usage": {"input_tokens": 12, "output_tokens": len(words),
                                                    "total_tokens": 12 + len(words)}}}]
    out = []
    for n, data in enumerate(events, start=2):
        data = {"type": data["type"], "sequence_number": n, **{k: v for k, v in data.items() if k != "type"}}
        out.append(f"event: {data['type']}\ndata: {compact(data)}\n\n")
    return out


# --- whole answers ---------------------------------------------------------------------------------
def whole(path: str, rid: str, words: list[str]) -> dict:
    text = "".join(words)
    if path == "/v1/messages":
        return {"id": rid, "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
                "model": MODEL, "stop_reason": "end_turn", "usage": {"input_tokens": 12, "output_tokens": len(words)}}
    if path == "/v1/completions":
        return {"id": rid, "object": "text_completion", "created": 1764460800, "model": MODEL,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length",
                             "stop_reason": None, "prompt_logprobs": None}],
                "usage": {"prompt_tokens": 12, "total_tokens": 12 + len(words), "completion_tokens": len(words)}}
    if path == "/v1/responses":
        return {"id": rid, "created_at": 1764460800, "model": MODEL, "object": "response", "status": "completed",
                "output": [{"id": "msg_" + rid, "type": "message", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": 12, "output_tokens": len(words), "total_tokens": 12 + len(words)}}
    return {"id": rid, "object": "chat.completion", "created": 1764460800, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                                 "tool_calls": []},
                         "logprobs": None, "finish_reason": "stop", "stop_reason": None}],
            "usage": {"prompt_tokens": 12, "total_tokens": 12 + len(words), "completion_tokens": len(words)}}


def error(path: str, status: int) -> dict:
    kind = "BadRequestError" if status == 400 else "InternalServerError"
    message = CONTEXT_ERROR if status == 400 else "Internal server error"
    if path == "/v1/messages":  # vLLM's translate_error_response
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": "input_tokens" if status == 400 else None,
                      "code": status}}


def lax_true(value) -> bool:
    """pydantic's lax bool as vLLM's `stream: bool | None` reads it (written out here, not imported from the
    bridge, so that the two are checked against each other)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.lower() in ("1", "on", "t", "true", "y", "yes")


# vLLM's sleep mode, with VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode as vLLM needs them: POST /sleep?level=N,
# POST /wake_up, GET /is_sleeping, POST /collective_rpc. A caller (the swap tests' fake `vllm`) may set these:
# each gets the level (or None for a wake) and returns None, or an error that the endpoint answers with a 500
# (a wake that ran out of GPU memory, and left this vLLM broken, as a real one is).
ON_SLEEP = None  # Callable[[int], str | None]
ON_WAKE = None  # Callable[[], str | None]


class StandIn:
    def __init__(self, sleep_mode: bool = False) -> None:
        self.events: list[dict] = []
        self.requests: list[dict] = []  # with STANDIN_KEEP_REQUESTS=1: the bodies vLLM got
        self.cache = PrefixCache()  # with STANDIN_PREFIX_CACHE=1
        self.active: dict[str, dict] = {}  # requests vLLM holds now, by id: head received, no answer finished
        self.count = 0
        self.sleep_mode = sleep_mode
        self.asleep = 0  # the level it sleeps at; 0: awake
        self.broken: str | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.count += 1
        rid = headers.get("x-standin-id") or f"req{self.count}"
        watched = not scope["path"].startswith("/_standin/")
        if watched:  # from its head on, as vLLM has it: a test waits for this instead of sleeping
            self.active[rid] = {"id": rid, "path": scope["path"], "body_bytes": 0}
        try:
            parts = []  # joined once: `body +=` copied a 200 MB body thousands of times
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.events.append({"id": rid, "path": scope["path"], "event": "cancelled",
                                        "at": time.monotonic()})
                    return
                parts.append(message.get("body", b""))
                if watched:
                    self.active[rid]["body_bytes"] += len(parts[-1])
                if not message.get("more_body"):
                    break
            body = b"".join(parts)
            work = asyncio.ensure_future(self.answer(scope, headers, body, rid, send))
            gone = asyncio.ensure_future(self.disconnected(receive))
            done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                gone.cancel()
                work.result()
                return
            work.cancel()
            self.events.append({"id": rid, "path": scope["path"], "event": "cancelled", "at": time.monotonic()})
        finally:
            self.active.pop(rid, None)

    async def sleep_endpoint(self, path: str, scope, body: bytes, whole_json) -> None:
        if path == "/is_sleeping":
            await whole_json(200, {"is_sleeping": bool(self.asleep)})
            return
        problem = None
        if path == "/sleep":
            level = int(dict(part.split("=", 1) for part in scope["query_string"].decode().split("&") if "=" in part)
                        .get("level", "1"))
            problem = ON_SLEEP(level) if ON_SLEEP else None
            if problem is None:
                self.asleep = level
        elif path == "/wake_up":
            problem = self.broken or (ON_WAKE() if ON_WAKE else None)
            if problem is None:
                self.asleep = 0
            else:
                self.broken = problem
        self.events.append({"path": path, "event": "sleep mode", "level": self.asleep, "problem": problem,
                            "body": body.decode("utf-8", "replace"), "at": time.monotonic()})
        if problem:
            await whole_json(500, {"error": {"message": problem, "type": "InternalServerError", "param": None,
                                             "code": 500}})
        else:
            await whole_json(200, {})

    @staticmethod
    async def disconnected(receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def answer(self, scope, headers: dict, body: bytes, rid: str, send) -> None:
        path, method = scope["path"], scope["method"]
        if path.endswith("\n"):  # as vLLM's router (Starlette) matches: `^/route$`, and `$` matches before a final "\n"
            path = path[:-1]
        sent: list[bytes] = []
        record = headers.get("x-standin-record", "1") != "0"
        first_at = None

        async def start(status: int, content_type: bytes, extra: list = ()) -> None:
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", content_type), (b"x-standin", b"1"), *extra]})

        async def write(data: bytes, more: bool = True) -> None:
            nonlocal first_at
            if first_at is None and data:
                first_at = time.monotonic()
            if record:
                sent.append(data)
            await send({"type": "http.response.body", "body": data, "more_body": more})

        async def whole_json(status: int, data, extra: list = ()) -> None:
            raw = compact(data).encode()
            await start(status, b"application/json", [(b"content-length", str(len(raw)).encode()), *extra])
            await write(raw, more=False)

        if path == "/_standin/events":
            await whole_json(200, self.events)
            return
        if path == "/_standin/requests":
            await whole_json(200, self.requests)
            return
        if path == "/_standin/active":
            await whole_json(200, list(self.active.values()))
            return
        if path == "/_standin/echo":  # the request as the stand-in received it
            await whole_json(200, {"headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
                                   "body_length": len(body), "client": scope["client"][0] if scope["client"] else None})
            return
        if self.sleep_mode and path in ("/sleep", "/wake_up", "/is_sleeping", "/collective_rpc"):
            await self.sleep_endpoint(path, scope, body, whole_json)
            return
        if (self.asleep or self.broken) and path.startswith("/v1/") and method == "POST":
            # a real one would hold the request (its scheduler paused) or fail it: the bridge must never send it
            await whole_json(500, {"error": {"message": self.broken or f"stand-in asleep (level {self.asleep})",
                                             "type": "InternalServerError", "param": None, "code": 500}})
            return
        if path == "/health":
            await start(200, b"application/json", [(b"content-length", b"0")])
            await write(b"", more=False)
            return
        if path == "/v1/models":
            await whole_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1764460800,
                                                               "owned_by": "vllm", "root": "x/ornith", "parent": None,
                                                               "max_model_len": 1024, "permission": []}]},
                             [(b"x-request-id", rid.encode("latin-1"))])
            return
        if path == "/metrics":
            raw = b'# HELP vllm:num_requests_running Number of requests in model execution batches.\n' \
                  b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="ornith"} 0.0\n'
            await start(200, b"text/plain; version=1.0.0; charset=utf-8", [(b"content-length", str(len(raw)).encode())])
            await write(raw, more=False)
            return
        if path in ("/tokenize", "/v1/messages/count_tokens"):
            try:
                request = json.loads(body or b"{}")
                assert isinstance(request, dict)
            except (ValueError, RecursionError, AssertionError):
                await whole_json(400, {"error": {"message": "invalid JSON", "type": "BadRequestError", "param": None,
                                                 "code": 400}})
                return
            if path.endswith("count_tokens") and os.environ.get("STANDIN_STRICT_NAMES") == "1" and \
                    request.get("model") not in (SERVED or [MODEL]):
                await whole_json(404, {"error": {"message": f"The model `{request.get('model')}` does not exist.",
                                                 "type": "NotFoundError", "param": "model", "code": 404}})
                return
            text = request.get("prompt") or json.dumps(request.get("messages", ""))
            count = len(text.split())
            data = {"input_tokens": count} if path.endswith("count_tokens") else \
                {"count": count, "max_model_len": 1024, "tokens": list(range(count)), "token_strs": None}
            await whole_json(200, data)
            return
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions", "/v1/responses",
                                            "/v1/messages", *CHAT_LIKE):
            await whole_json(404 if method in ("GET", "POST") else 405, {"detail": "Not Found"})
            return
        path = CHAT_LIKE.get(path, path)

        try:
            # A huge prompt (benchmarks) is not parsed: the seconds json.loads takes would block the
            # stand-in's other answers and be measured as the bridge's.
            request = json.loads(body) if len(body) < 16 << 20 else {"stream": b'"stream": true' in body[:200]}
        except (ValueError, RecursionError) as err:  # vLLM: FastAPI's json_invalid, answered 400
            await whole_json(400, {"error": {"message": f"invalid JSON: {err}", "type": "BadRequestError",
                                             "param": None, "code": 400}})
            return
        if not isinstance(request, dict):
            await whole_json(400, {"error": {"message": "not an object", "type": "BadRequestError", "param": None,
                                             "code": 400}})
            return
        if os.environ.get("STANDIN_STRICT_NAMES") == "1" and request.get("model") and \
                request.get("model") not in (SERVED or [MODEL]):
            await whole_json(404, {"error": {"message": f"The model `{request.get('model')}` does not exist.",
                                             "type": "NotFoundError", "param": "model", "code": 404}})
            self.events.append({"id": rid, "path": path, "event": "not found", "model": request.get("model")})
            return
        if os.environ.get("STANDIN_KEEP_REQUESTS") == "1":
            self.requests.append({"id": rid, "path": path, "session": headers.get("x-claude-code-session-id"),
                                  "request": request})
        scope["standin_model"] = request.get("model")
        streaming = lax_true(request.get("stream"))
        delay = float(headers.get("x-standin-delay", "0"))
        gap = float(headers.get("x-standin-gap", "0"))
        words = tokens(int(headers.get("x-standin-chunks", "4")))
        if "x-standin-pad" in headers:
            words = [word.ljust(int(headers["x-standin-pad"]), "x") for word in words]
        if "x-standin-error" in headers:
            await asyncio.sleep(delay)  # vLLM validates after tokenising, before any byte
            await whole_json(int(headers["x-standin-error"]), error(path, int(headers["x-standin-error"])))
        elif not streaming:
            await asyncio.sleep(delay)
            if "x-standin-break" in headers:  # half of a sized body, then the connection breaks
                raw = compact(whole(path, rid, words)).encode()
                await start(200, b"application/json", [(b"content-length", str(len(raw)).encode())])
                await write(raw[:len(raw) // 2])
                raise ConnectionAbortedError("the stand-in breaks off its answer (x-standin-break)")
            await whole_json(200, whole(path, rid, words))
        else:
            # vLLM's StreamingResponse sends its headers once the request is accepted; the body waits
            # for the first token.
            await start(200, b"text/event-stream; charset=utf-8")
            if path == "/v1/responses":
                for part in responses_head(rid):
                    await write(part.encode())
            await asyncio.sleep(delay)
            if path == "/v1/messages" and os.environ.get("STANDIN_PREFIX_CACHE") == "1":
                parts = anthropic_stream(rid, words, self.cache.usage(request))
            else:
                parts = {"/v1/chat/completions": chat_stream, "/v1/completions": completion_stream,
                         "/v1/messages": anthropic_stream, "/v1/responses": responses_tail}[path](rid, words)
            for part in parts:
                await write(part.encode())
                if gap:
                    await asyncio.sleep(gap)
            if "x-standin-break" in headers:
                raise ConnectionAbortedError("the stand-in breaks off its answer (x-standin-break)")
            await write(b"", more=False)
        self.events.append({"id": rid, "path": path, "event": "done", "first_byte_at": first_at,
                            "model": scope.get("standin_model"),
                            "body": b"".join(sent).decode() if record else None})


# vLLM's other generating paths, answered here as a chat completion (what /invocations routes a chat body to)
CHAT_LIKE = {"/invocations": "/v1/chat/completions", "/v1/chat/completions/batch": "/v1/chat/completions"}


def options_dict(argv: list[str]) -> dict:
    """{dest: value} of every option in argv, the way argparse keeps them (a switch True, nargs='+' a list)."""
    options, key = {}, None
    for token in argv:
        if token.startswith("--"):
            name, equals, value = token[2:].partition("=")
            key = name.replace("-", "_")
            options[key] = value if equals else True
            key = None if equals else key
        elif key is not None:
            held = options[key]
            options[key] = token if held is True else [*held, token] if isinstance(held, list) else [held, token]
            if key == "api_key" and not isinstance(options[key], list):
                options[key] = [token]
    return options


def main(argv: list[str], ignore_sigterm: bool = False) -> int:
    """ignore_sigterm: keep serving through SIGTERM, as a wedged vLLM does (the swap tests' SIGKILL case)."""
    import contextlib

    import uvicorn  # the image's, or the test environment's

    global MODEL
    host, port = "127.0.0.1", 8000
    for i, token in enumerate(argv):  # accepts `vllm serve MODEL ... --host H --port N` as well
        if token == "--port":
            port = int(argv[i + 1])
        elif token == "--host":
            host = argv[i + 1]
        elif token == "--served-model-name":  # answers under the first served name, as vLLM does
            MODEL = argv[i + 1]
            names = []
            for name in argv[i + 1:]:
                if name.startswith("-"):
                    break
                names.append(name)
            SERVED[:] = names
    print(f"stand-in vllm: serving {MODEL} on {host}:{port}", file=sys.stderr, flush=True)
    # What vLLM logs of its arguments: the argv as a Python list, and its non-default arguments as a dict of their
    # destinations (vllm/entrypoints/serve/utils/api_utils.py log_non_default_args), --api-key's a list
    print(f"stand-in vllm: argv {['vllm', *argv]!r}", file=sys.stderr, flush=True)
    print(f"(APIServer pid={os.getpid()}) INFO api_utils.py:273] non-default args: {options_dict(argv)!r}",
          file=sys.stderr, flush=True)
    sleep_mode = "--enable-sleep-mode" in argv and os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
    server = uvicorn.Server(uvicorn.Config(StandIn(sleep_mode), host=host, port=port, log_level="warning", lifespan="on",
                                           timeout_keep_alive=5))
    if ignore_sigterm:
        server.capture_signals = contextlib.nullcontext
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
