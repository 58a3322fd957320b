"""The bridge's command line: `bridge.py --port 8080 --upstream http://127.0.0.1:18081 [--heartbeat 15]`.

The launcher writes it (contract.bridge_argv); this module reads it and the contract's environment names into the
relay's Config and the front door's Limits, sets the log's cleaner, and hands them to app.serve.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..contract import SwapConfig, key_problem
from ..logline import LINE_LIMIT, logger, set_cleaner, stamped
from ..safetext import safe

try:
    import aiohttp  # noqa: F401 - checked here: the relay talks to vLLM with it
    import httptools  # noqa: F401 - uvicorn's parser, which the front door extends
    import uvicorn  # noqa: F401
except ImportError as missing:  # a venv without vLLM's server stack
    print(stamped("prebake-bridge", f"error: the keep-alive bridge needs uvicorn, httptools and aiohttp, which "
                  f"vLLM's venv ships ({missing}). Run this image's /opt/venv/bin/python, or set VL_BRIDGE=off to let "
                  "vLLM bind the exposed port itself."), file=sys.stderr, flush=True)
    sys.exit(2)

from . import auth  # noqa: E402
from .frontdoor import HEAD_TIMEOUT_S, Limits  # noqa: E402
from .relay import Config  # noqa: E402
from .requestbody import BODY_IDLE_S  # noqa: E402

log = logger("prebake-bridge")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bridge.py", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, required=True, help="the exposed port (VL_PORT)")
    parser.add_argument("--upstream", required=True, help="vLLM's address, http://HOST:PORT")
    parser.add_argument("--heartbeat", type=float, default=15.0, help="seconds of silence before a heartbeat")
    parser.add_argument("--head-timeout", type=float, default=HEAD_TIMEOUT_S,
                        help="seconds a request's line and headers may take to arrive (then 408)")
    parser.add_argument("--body-timeout", type=float, default=BODY_IDLE_S,
                        help="seconds a request body may pause between two bytes (then 408)")
    parser.add_argument("--start-hold", type=float, default=0.0,
                        help="seconds a generation request is held while vLLM starts (VL_START_HOLD); 0: 503 at once")
    parser.add_argument("--swap", type=SwapConfig.from_json, help="VL_SWAP's models, as the launcher passes them")
    parser.add_argument("--control-fd", type=int, help="the launcher's end of the swap channel (inherited)")
    parser.add_argument("--served-names", type=json.loads, default=[],
                        help="vLLM's served names, a JSON list, its own first: another claude-* name is renamed to it")
    parser.add_argument("--root-path", default="", help="vLLM's --root-path, which its router strips from a path")
    return parser.parse_args(argv)


def config_of(args: argparse.Namespace, environ: dict[str, str]) -> Config:
    return Config(upstream=args.upstream.rstrip("/"), heartbeat_s=args.heartbeat,
                  api_key=auth.api_key(environ), body_timeout_s=args.body_timeout, swap=args.swap,
                  control_fd=args.control_fd, served=tuple(args.served_names), root_path=args.root_path,
                  start_hold_s=args.start_hold)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    environ = dict(os.environ)
    problem = key_problem(environ.get(auth.VLLM_KEY_VARIABLE) or "")
    if problem:
        log(f"error: {auth.VLLM_KEY_VARIABLE} {problem}.")
        return 2
    from ..limits import connection_cap, raise_open_files
    from ..redact import Redactor
    from .app import event_loop, serve

    # Every line the bridge logs: no secret (a URL's password, the key), no control character from a request.
    redact = Redactor(environ)
    set_cleaner(lambda text: safe(text, LINE_LIMIT, redact))
    config = config_of(args, environ)
    limits = Limits(head_timeout_s=args.head_timeout, max_connections=connection_cap(raise_open_files()))
    access = "an API key required but on /health" if config.api_key else \
        "no API key (VLLM_API_KEY unset): open to anyone with the URL"
    log(f"listening on {args.host}:{args.port}, relaying to {config.upstream}; heartbeat after "
        f"{config.heartbeat_s:g} s of silence; {access}; event loop: {event_loop()}")
    return serve(config, environ, args.host, args.port, limits)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
