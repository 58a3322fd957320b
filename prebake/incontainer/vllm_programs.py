"""The programs that import vLLM (programs/*.py), run as children of one zygote (programs/zygote.py).

Each of them used to be its own `python PROGRAM`, each paying vLLM's imports (~6 s of torch, transformers,
openai, pydantic... on 2 cores) before its work (~1-3 s). The zygote imports those once, with the stub
libcuda.so.1 on its LD_LIBRARY_PATH, and forks a child per program: a child crashing, patching vLLM or
loading the plugin leaves the zygote as it was for the next. `start()` begins the zygote's imports in the
background (run.py calls it before the first check when the host sent no recorded outcome, so that they
overlap the checks that need no vLLM); `run()` starts it if need be and waits for it.

A fork is safe here: the zygote runs no thread of its own (torch parks one native thread at import, as in
every `python PROGRAM`; a fork copies only the calling thread, and nothing the child runs waits on it),
initialises no CUDA (there is no GPU in a build, and the stub's entry points only return an error), and starts
no OpenMP pool. PyTorch's own DataLoader forks its workers the same way, after `import torch`.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading

from .stub_libcuda import build_stub_libcuda

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "zygote.py")
ENV = {"VLLM_LOGGING_LEVEL": "ERROR"}  # every program's, besides the image's own and the stub's LD_LIBRARY_PATH


class Outcome:
    """What subprocess.run would give: returncode, stdout, stderr; and the stub's note."""

    def __init__(self, returncode: int, stdout: str, stderr: str, note: str) -> None:
        self.returncode, self.stdout, self.stderr, self.note = returncode, stdout, stderr, note


class _Zygote:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="prebake-zygote-")
        stub_dir, self.note = build_stub_libcuda(self.folder)
        self.env = dict(os.environ, **ENV)
        if stub_dir:
            self.env["LD_LIBRARY_PATH"] = stub_dir + (":" + self.env["LD_LIBRARY_PATH"]
                                                      if self.env.get("LD_LIBRARY_PATH") else "")
        self.process = subprocess.Popen([sys.executable, ZYGOTE], env=self.env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=open(os.path.join(self.folder, "zygote.err"), "w"),
                                        text=True)
        self.ready = self._answer()  # {"ready": seconds, "threads": N, "preloaded": [...]}, or None
        self.runs = 0

    def _answer(self):
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def error(self) -> str:
        with open(os.path.join(self.folder, "zygote.err"), encoding="utf-8", errors="replace") as f:
            return f.read().strip()[-1200:]

    def run(self, program: str, args, env, timeout: float) -> Outcome:
        self.runs += 1
        out, err = (os.path.join(self.folder, f"{self.runs}.{name}") for name in ("out", "err"))
        request = {"program": program, "args": list(args), "env": dict(self.env, **env), "stdout": out, "stderr": err}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        pid = (self._answer() or {}).get("pid")
        timer = threading.Timer(timeout, lambda: pid and os.kill(pid, 9))
        timer.start()
        try:
            status = (self._answer() or {}).get("status", 1)
        finally:
            timer.cancel()
        with open(out, encoding="utf-8", errors="replace") as f_out, \
                open(err, encoding="utf-8", errors="replace") as f_err:
            return Outcome(status, f_out.read(), f_err.read(), self.note)


_LOCK = threading.Lock()
_STATE = {}


def _zygote() -> _Zygote:
    with _LOCK:  # one zygote, whoever asks first starts it; the others wait for its imports
        if "zygote" not in _STATE:
            _STATE["zygote"] = _Zygote()
        return _STATE["zygote"]


def start() -> None:
    """Begin the zygote's imports in the background (idempotent)."""
    threading.Thread(target=_zygote, daemon=True).start()


def run(program: str, args=(), env=None, timeout: float = 300) -> Outcome:
    """`python PROGRAM ARGS` with the stub libcuda.so.1 and ENV (plus `env`), as a child of the zygote.
    One program at a time: the zygote answers requests in order."""
    zygote = _zygote()
    with _LOCK:
        if zygote.ready is None or zygote.process.poll() is not None:
            return Outcome(1, "", f"the vLLM programs' zygote did not start: {zygote.error()}", zygote.note)
        return zygote.run(program, args, env or {}, timeout)
