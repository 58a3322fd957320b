"""The router pod's program (routerpod/router.py, nginx behind it) on a free port, in front of pods given by URL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from . import REPO
from .servers import Server

ROUTER = REPO / "routerpod" / "router.py"
ROUTER_KEY = "router-key-51c0ffee"  # what clients send to the router
PODS_KEY = "pod-key-7f3a9c2e"  # prebake_testing.pods.KEY: what every pod has as VLLM_API_KEY


class Router(Server):
    def __init__(self, tmp_path: Path, pod_urls: list[str], port: int, env: dict | None = None) -> None:
        self.run_dir = tmp_path / "router"
        self.pods_file = tmp_path / "pods.txt"
        self.pods_file.write_text("\n".join(pod_urls) + "\n")
        self.env = {**os.environ, "PREBAKE_PODS_FILE": str(self.pods_file), "VLLM_API_KEY": ROUTER_KEY,
                    "PREBAKE_PODS_KEY": PODS_KEY, "VL_PORT": str(port), "PREBAKE_ROUTER_DIR": str(self.run_dir),
                    **(env or {})}
        super().__init__([sys.executable, str(ROUTER), "serve"], port, "the router (nginx)", self.env)

    def reload(self, pod_urls: list[str]) -> subprocess.CompletedProcess:
        """A new pod list, as a user writes it into the file on the router pod, then `router.py reload`."""
        self.pods_file.write_text("\n".join(pod_urls) + "\n")
        return subprocess.run([sys.executable, str(ROUTER), "reload"], env=self.env, capture_output=True, text=True,
                              timeout=30)
