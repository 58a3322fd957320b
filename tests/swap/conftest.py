"""The swap tests' pods: the real launcher with VL_SWAP and stand-in `vllm` processes (prebake_testing.swappod
says how each stand-in is steered)."""

from __future__ import annotations

import pytest

from prebake_testing.hub import Hub
from prebake_testing.swappod import SwapPod


@pytest.fixture
def pods(tmp_path):
    """Start pods with pods(models, env); every one is stopped and checked for leftovers at the end."""
    started: list[SwapPod] = []

    def start(models: dict, env: dict | None = None, ready: bool = True, name: str = "pod",
              args: list[str] = ()) -> SwapPod:
        folder = tmp_path / f"{name}{len(started)}"
        folder.mkdir()
        pod = SwapPod(folder, models, env, args=args)
        started.append(pod)
        return pod.wait_ready() if ready else pod

    yield start
    for pod in started:
        if pod.process.poll() is None:
            pod.stop()
        else:
            pod.log.close()
        assert pod.kill_leftovers() == [], f"stand-in processes outlived the pod:\n{pod.stderr()}"
        # every state change either process made followed modelstate.TRANSITIONS
        log = pod.log_path.read_text()  # the launcher's and the bridge's lines (pod.log is closed now)
        assert "refused to move" not in log, log


@pytest.fixture
def hub():
    """The stand-in Hugging Face Hub (prebake_testing.hub), with no repository: every upload fails at once."""
    server = Hub()
    yield server
    server.stop()
