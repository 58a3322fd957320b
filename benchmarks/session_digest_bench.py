"""What the per-session figures cost the bridge per request: reading a Claude Code-shaped body with and without
the prompt's hashes (entrypoint/serving/promptdigest.py), in 64 KiB chunks as uvicorn hands them over.

    python3 benchmarks/session_digest_bench.py [--messages 400] [--repeat 5]

Prints the body's size and the best time of each way over --repeat runs (docs/status.md, "Claude Code sessions").
"""

from __future__ import annotations

import argparse
import json
import time

from entrypoint.serving.promptdigest import PromptDigest
from entrypoint.serving.streamflag import StreamField

CHUNK = 65536


def body(messages: int) -> bytes:
    """Tool turns with ~4 KB results, a 26,000-character system prompt and 24 tools, as Claude Code sends them."""
    turns = []
    for n in range(messages // 2):
        turns += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                                                     "input": {"command": f"pytest -k case{n}"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                                "content": "line of output\n" * 300}]}]
    return json.dumps({"model": "ornith", "messages": turns, "system": [{"type": "text", "text": "s" * 26000}],
                       "tools": [{"name": f"tool{i}", "description": "d" * 1000, "input_schema": {"type": "object"}}
                                 for i in range(24)], "max_tokens": 20000, "stream": True},
                      separators=(",", ":")).encode()


def read(raw: bytes, hashed: bool) -> float:
    began = time.perf_counter()
    field = StreamField(cuts=hashed)
    digest = PromptDigest(field) if hashed else None
    for at in range(0, len(raw), CHUNK):
        field.feed(raw[at:at + CHUNK])
        if digest is not None:
            digest.feed(raw[at:at + CHUNK])
    field.finish()
    if digest is not None:
        digest.prompt()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    raw = body(args.messages)
    plain = min(read(raw, False) for _ in range(args.repeat))
    hashed = min(read(raw, True) for _ in range(args.repeat))
    print(f"{len(raw) / 1e6:.1f} MB body, {args.messages} messages: read {plain * 1000:.1f} ms, "
          f"read and hashed {hashed * 1000:.1f} ms")


if __name__ == "__main__":
    main()
