"""The stand-in vLLM (standin.py) with a prefix cache that counts as vLLM's does, for trying the GPU harness's
`router` run (benchmarks/gpu/router_run.py) without a GPU:

    python -m prebake_testing.prefix_standin [serve MODEL ...] --port N

Each chat or /v1/messages request's prompt (its system, tools and messages, in the order a chat template renders
them) is cut into blocks of BLOCK characters, each named by the hash of everything up to its end, as vLLM names its
KV blocks. The blocks already held from the start are hits; then the prompt's blocks are held too (no eviction). /metrics
answers vLLM's two counters, vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total, in characters."""

from __future__ import annotations

import hashlib
import json
import sys

from prebake_testing import standin

BLOCK = 64


class PrefixCache:
    def __init__(self) -> None:
        self.held: set[bytes] = set()
        self.queries = 0
        self.hits = 0

    def see(self, prompt: str) -> None:
        names, digest = [], hashlib.sha256()
        for start in range(0, len(prompt) - BLOCK + 1, BLOCK):
            digest.update(prompt[start:start + BLOCK].encode())
            names.append(digest.copy().digest())
        found = next((i for i, name in enumerate(names) if name not in self.held), len(names))
        self.queries += len(names) * BLOCK
        self.hits += found * BLOCK
        self.held.update(names)


def prompt_of(path: str, body: bytes) -> str | None:
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return None
    messages = request["messages"]
    if path == "/v1/messages":  # the top-level system, then the tools, then the turns; vLLM drops the billing header
        system = request.get("system") or ""
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        kept = [b for b in blocks if not str(b.get("text", "")).startswith("x-anthropic-billing-header")]
        return json.dumps([kept, request.get("tools"), messages], sort_keys=True)
    return json.dumps([messages[:1], request.get("tools"), messages[1:]], sort_keys=True)


class PrefixStandIn:
    """ASGI: /metrics from the cache, every other request to the stand-in, its body seen by the cache first."""

    def __init__(self) -> None:
        self.inner = standin.StandIn()
        self.cache = PrefixCache()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            raw = (f"# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total{{engine=\"0\"}} "
                   f"{float(self.cache.queries)}\n# TYPE vllm:prefix_cache_hits counter\n"
                   f"vllm:prefix_cache_hits_total{{engine=\"0\"}} {float(self.cache.hits)}\n").encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(raw)).encode())]})
            await send({"type": "http.response.body", "body": raw})
            return
        if scope["type"] != "http" or scope["path"] not in ("/v1/chat/completions", "/v1/messages"):
            await self.inner(scope, receive, send)
            return
        parts = []

        async def seeing():
            message = await receive()
            if message["type"] == "http.request":
                parts.append(message.get("body", b""))
                if not message.get("more_body"):
                    prompt = prompt_of(scope["path"], b"".join(parts))
                    if prompt is not None:
                        self.cache.see(prompt)
            return message
        await self.inner(scope, seeing, send)


def main(argv: list[str]) -> int:
    import uvicorn

    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
    uvicorn.run(PrefixStandIn(), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
