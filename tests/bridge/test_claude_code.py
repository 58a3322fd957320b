"""The real Claude Code CLI (npm's @anthropic-ai/claude-code, 2.1.x) against the bridge and a stand-in vLLM that
checks model names as vLLM does: its own model names are answered, and a wrong key ends it in seconds with
the bridge's message instead of minutes of silent retries. Skipped where `claude` is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.bridge.conftest import StandIn, start_bridge

CLAUDE = shutil.which("claude")
KEY = "sk-pod-claude-code-7f3e"
SERVED = ["ornith", "claude-ornith", "claude-ornith[1m]"]
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="Claude Code is not installed (npm install -g "
                                                        "@anthropic-ai/claude-code)")


@pytest.fixture(scope="module")
def pod():
    vllm = StandIn(args=["--served-model-name", *SERVED], env={"STANDIN_STRICT_NAMES": "1"})
    bridge = start_bridge(vllm.port, key=KEY, extra=["--served-names", json.dumps(SERVED)])
    yield vllm, bridge
    bridge.stop()
    vllm.stop()


def claude(bridge, tmp_path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {name: value for name, value in os.environ.items() if not name.startswith(("ANTHROPIC_", "CLAUDE_"))}
    full.update({"HOME": str(home), "ANTHROPIC_BASE_URL": bridge.url, "DISABLE_TELEMETRY": "1",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **env})
    began = time.monotonic()
    done = subprocess.run([CLAUDE, "-p", "say hi", *args], env=full, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - began


@pytest.mark.parametrize("args", [(), ("--model", "haiku"), ("--model", "opus")])
def test_claude_codes_own_model_names_are_answered(pod, tmp_path, args):
    done, _ = claude(pod[1], tmp_path, *args, ANTHROPIC_AUTH_TOKEN=KEY)
    assert done.returncode == 0 and "tok0" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("variable", ["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"])
def test_a_wrong_key_stops_claude_code_at_once_naming_the_pods_key(pod, tmp_path, variable):
    done, took = claude(pod[1], tmp_path, **{variable: "sk-not-this-pods"})
    output = done.stdout + done.stderr
    assert done.returncode != 0 and took < 30, (took, output)  # a plain 401 was retried for ~3 minutes
    assert "Failed to authenticate. API Error: 401 wrong API key" in output and "VLLM_API_KEY" in output, output
