"""docs/quickstart.md's SDK example runs as shown against a keyed keep-alive bridge (a stand-in vLLM behind it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from prebake_testing.servers import start_bridge

ROOT = Path(__file__).resolve().parents[2]
KEY = "a-key-for-the-example"


def quickstart_python() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "quickstart.md").read_text(), flags=re.M | re.S)
    assert len(blocks) == 1, "docs/quickstart.md should show one Python example (the SDKs)"
    return blocks[0]


@pytest.fixture(scope="module")
def keyed_bridge(standin):
    server = start_bridge(standin.port, key=KEY)
    yield server
    server.stop()


def run_example(port: int, key: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "POD": f"http://127.0.0.1:{port}", "VLLM_API_KEY": key}
    return subprocess.run([sys.executable, "-c", quickstart_python()], env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_sdk_example_talks_to_a_pod(keyed_bridge) -> None:
    result = run_example(keyed_bridge.port, KEY)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(answers) == 2, result.stdout  # the OpenAI reply, then the Anthropic one


def test_the_example_really_sends_the_key(keyed_bridge) -> None:
    result = run_example(keyed_bridge.port, "not-the-key")
    assert result.returncode != 0 and "401" in result.stderr
