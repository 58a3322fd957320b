"""The in-image programs, one package per process: launcher/ (probe the host, decide, start `vllm serve` and
the bridge, supervise) and serving/ (the keep-alive bridge: relay, key, status page, watchdog, swap, journal,
idle stop). contract.py alone defines what crosses between them; launch.py and bridge.py are their command
lines. The launcher is stdlib only (huggingface_hub is imported lazily by hfcache when a cached model must
be verified); the bridge runs on vLLM's uvicorn and aiohttp.
"""
