"""Every command a launcher message tells the user to run exists and works as written, on a machine without a
GPU: the no-key warning's `./build.py runpod template --api-key-secret NAME`, and `launch.py --help`'s command
for vLLM's own options (`vllm serve --help` fails there: "Failed to infer device type"); the latter runs in the
real image in tests/integration/prebuilt/test_vllm_help.py."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from entrypoint.launcher.access import OPEN_WARNING
from entrypoint.launcher.usage import VLLM_HELP

ROOT = Path(__file__).resolve().parents[2]


def test_the_no_key_warning_names_a_command_that_sets_the_key(tmp_path):
    command = re.search(r"`(\./build\.py [^`]*)`", OPEN_WARNING)
    assert command, OPEN_WARNING
    words = shlex.split(command.group(1).replace(" ...", ""))
    assert words[:3] == ["./build.py", "runpod", "template"]
    image = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-0123456789ab"
    words = [word if word != "NAME" else "prebake_api_key" for word in words]
    done = subprocess.run([sys.executable, *words, "--variant", "a40", "--image", image, "--image-size-gb", "9"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"VLLM_API_KEY": "{{ RUNPOD_SECRET_prebake_api_key }}"' in done.stdout


def test_the_vllm_help_command_names_the_images_copy_of_a_file_of_the_checkout():
    script = shlex.split(VLLM_HELP)[-1]
    assert script.startswith("/opt/prebake/entrypoint/")
    assert (ROOT / "entrypoint" / script.rsplit("/", 1)[1]).is_file()
    template = (ROOT / "templates" / "variant.Dockerfile.j2").read_text()
    assert "COPY entrypoint/ /opt/prebake/entrypoint/" in template
    assert "vllm serve --help" not in VLLM_HELP.replace("`", "")
