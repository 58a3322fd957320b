"""docs/quickstart.md's SDK example runs as shown against the keep-alive bridge (a stand-in vLLM behind it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart_python() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "quickstart.md").read_text(), flags=re.M | re.S)
    assert len(blocks) == 1, "docs/quickstart.md should show one Python example (the SDKs)"
    return blocks[0]


def test_the_sdk_example_talks_to_a_pod(bridge) -> None:
    env = {**os.environ, "POD": f"http://127.0.0.1:{bridge.port}", "PREBAKE_API_KEY": "a-key-for-the-example"}
    result = subprocess.run([sys.executable, "-c", quickstart_python()], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(answers) == 2, result.stdout  # the OpenAI reply, then the Anthropic one
