"""`launch.py --help`'s command for vLLM's own options works in the real image without a GPU, where `vllm serve
--help` fails ("Failed to infer device type"). The checkout's entrypoint/vllm_help.py is mounted where the image
keeps it, so the test checks this revision's file on the built image."""

from __future__ import annotations

import shlex

from entrypoint.launcher.usage import VLLM_HELP
from prebake_testing import REPO


def run(client, image: str, command: list[str], entrypoint: str) -> tuple[int, str]:
    container = client.containers.run(image, command, entrypoint=entrypoint, detach=True, network_disabled=True,
                                      volumes={str(REPO / "entrypoint" / "vllm_help.py"): {
                                          "bind": "/opt/prebake/entrypoint/vllm_help.py", "mode": "ro"}})
    try:
        code = container.wait(timeout=300)["StatusCode"]
        return code, container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)


def test_vllm_options_print_without_a_gpu(client, a40):
    words = shlex.split(VLLM_HELP)
    entrypoint, args = words[words.index("--entrypoint") + 1], words[words.index("IMAGE") + 1:]
    code, out = run(client, a40, [*args, "--help=max-model-len"], entrypoint)
    assert code == 0 and "--max-model-len MAX_MODEL_LEN" in out, out[-3000:]
    code, out = run(client, a40, args, entrypoint)
    assert code == 0 and "usage: vllm serve" in out and "--help=all" in out, out[-3000:]
    code, out = run(client, a40, ["serve", "--help"], "vllm")
    assert code != 0 and "Failed to infer device type" in out  # why the launcher does not point at it
