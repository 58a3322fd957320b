"""A scripted Anthropic endpoint that records what the real Claude Code CLI sends, turn by turn.

    python3 benchmarks/claude_session_standin.py --port 8399 --out session.jsonl --turns 24

Point `claude -p` at it (ANTHROPIC_BASE_URL=http://127.0.0.1:8399). Each request of the main
conversation (it carries tools) is answered, streamed as vLLM's /v1/messages streams, with one
Bash tool call (`echo step N`) until --turns calls were made, then a final text; background
calls (no tools) get a short text. Every request body is appended to --out as one JSON line
{"path", "headers": {...anthropic-*}, "body"}. benchmarks/prefix_cache_bench.py replays such a
recording; tests/fixtures/claude_code_session.jsonl.xz was made with it (docs/measurements.md, "Long Claude Code sessions").
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def answer(body: dict, turn: int, turns: int) -> list[bytes]:
    """The stream of one reply: a tool call while the script lasts, else a closing text."""
    model = body.get("model", "standin")
    start = {"type": "message_start", "message": {
        "id": f"msg_standin_{turn}", "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1000, "output_tokens": 0}}}
    events = [sse("message_start", start)]
    if body.get("tools") and turn < turns:
        command = {"command": f"echo step {turn + 1}", "description": f"Print step {turn + 1}"}
        events += [
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": f"Running step {turn + 1}."}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": f"toolu_standin_{turn + 1:03d}", "name": "Bash", "input": {}}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(command)}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ]
        stop = "tool_use"
    else:
        text = "All steps done." if body.get("tools") else "Standin session"
        events += [
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": text}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "end_turn"
    events += [sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 12}}),
               sse("message_stop", {"type": "message_stop"})]
    return events


def serve(port: int, out: str, turns: int) -> ThreadingHTTPServer:
    lock = threading.Lock()
    state = {"turn": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.loads(raw or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("anthropic-")}
            with lock:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"path": self.path, "headers": headers, "body": body}) + "\n")
                turn = state["turn"]
                if body.get("tools") and "/count_tokens" not in self.path:
                    state["turn"] += 1
            if "/count_tokens" in self.path:
                data = json.dumps({"input_tokens": 1000}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for event in answer(body, turn, turns):
                self.wfile.write(event)
                self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8399)
    parser.add_argument("--out", required=True, help="JSON lines file the requests are appended to")
    parser.add_argument("--turns", type=int, default=24, help="tool calls before the final answer")
    args = parser.parse_args()
    server = serve(args.port, args.out, args.turns)
    print(f"listening on 127.0.0.1:{args.port}, recording to {args.out}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
