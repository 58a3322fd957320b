"""One Python for every program that imports vLLM: what they share is imported once, each program runs in a child.

    python zygote.py        (LD_LIBRARY_PATH with the stub libcuda.so.1 already set: the loader reads it at start)

Imports PRELOAD, then reads one request per line on stdin, {"program": PATH, "args": [...], "env": {...},
"stdout": PATH, "stderr": PATH}, forks a child per request and answers on stdout {"pid": N} at once, then
{"status": N} when the child ends (its exit status; 128 + signal when killed). The child takes the request's
environment, argv and output files and runs the program as __main__, so a program behaves as under
`python PROGRAM ARGS`, and nothing it imports, patches or crashes on reaches the next one: each child starts
from the state PRELOAD left. The first line out is {"ready": ..., "threads": N, "preloaded": [...]}.

PRELOAD is vLLM's heavy dependencies and none of vLLM itself: vLLM binds its platform at import (the
programs that build its parser set vLLM's CUDA platform first, vllm_platform.py), and its plugins patch its
classes, so vLLM's own modules are imported in the child, where a program sets up what it needs first; so is
the Hub client, which reads its offline switch at import. The zygote refuses to serve when a preloaded
module pulled one of NOT_PRELOADED in.
"""

import importlib
import json
import os
import runpy
import signal
import sys
import threading
import time
import traceback

# Measured with -X importtime in the a40 image (docs/selftest.md, "Time"): of the ~6 s the programs'
# imports take, torch and torchvision are 3.3 s, openai, pydantic and the HTTP stack 1 s more. Not
# huggingface_hub or what imports it (transformers, mistral_common): it reads HF_HUB_OFFLINE at import, which
# the sessions program sets and the serve parser must not (vLLM then resolves a model's repo otherwise).
PRELOAD = (
    "torch", "torch.nn", "torch.distributed", "torchvision", "triton", "sympy", "numpy", "pydantic", "openai",
    "openai.types.chat", "openai.types.responses", "fastapi", "fastapi.testclient", "starlette", "aiohttp",
    "jinja2", "msgspec", "zmq", "cbor2", "psutil", "prometheus_client", "opentelemetry",
)
# Modules whose state is each program's own: vLLM (its platform, the plugins' patches) and the Hub client.
NOT_PRELOADED = ("vllm", "prebake_thinking", "huggingface_hub", "transformers")


def preload() -> list[str]:
    loaded = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # not in this image, or not importable alone: the child imports it as it would anyway
            pass
    pulled = sorted(name for name in sys.modules if name.split(".")[0] in NOT_PRELOADED)
    if pulled:  # their state must be each child's: a preloaded module pulled them in
        raise SystemExit(f"the zygote's preload imported {', '.join(pulled[:5])}: take that module out of PRELOAD")
    return loaded


def live_threads() -> int:
    """OS threads of this process (a fork copies only the calling one; a lock another held stays held)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def child(request: dict) -> None:
    """In the forked child: become `python PROGRAM ARGS` with the request's environment and output files."""
    try:
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.stdin = open(os.devnull)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        program = request["program"]
        sys.argv = [program, *request["args"]]
        sys.path[0] = os.path.dirname(os.path.abspath(program))  # its siblings, as `python PROGRAM` puts them
        runpy.run_path(program, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main() -> int:
    started = time.monotonic()
    loaded = preload()
    answer = sys.stdout
    print(json.dumps({"ready": round(time.monotonic() - started, 2), "threads": live_threads(),
                      "preloaded": loaded}), file=answer, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        print(json.dumps({"pid": pid}), file=answer, flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"status": code if code >= 0 else 128 - code}), file=answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
