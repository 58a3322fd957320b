"""entrypoint/vllm_facts.json: generated from an image's vLLM (`./build.py vllm-facts`), checked by every build.

The facts come from vLLM's own objects, read inside the image by prebake/incontainer/programs/vllm_facts_derive.py
(run as the self-test's vllm-facts check); this module writes them into the committed file, or says how the
committed file differs from them. The self-test runs the same comparison on every build (docs/selftest.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker

from prebake import selftest
from prebake.errors import PrebakeError
from prebake.incontainer.checks.vllm_facts_match import differences

FILE = Path(__file__).resolve().parent.parent / "entrypoint" / "vllm_facts.json"
GENERATOR = "prebake/incontainer/programs/vllm_facts_derive.py"


def command(variant: str) -> str:
    return f"./build.py vllm-facts --variant {variant}"


def render(facts: dict[str, Any]) -> str:
    """The file's text: a header naming what generated it, then the facts (vLLM's version first)."""
    header = {"generated_by": f"`./build.py vllm-facts` ({GENERATOR} in the image, from vLLM's own objects): do "
                              "not edit; every build's self-test checks it (vllm-facts, docs/selftest.md)"}
    return json.dumps({**header, **facts}, indent=1) + "\n"


def derive(client: docker.DockerClient, image: str) -> dict[str, Any]:
    """The facts of `image`'s vLLM, read by the vllm-facts check in a container of it (no file to compare)."""
    spec = {"checks": ["vllm-facts"], "pins": {"vllm": "(the image's)"}}
    status, report, stderr = selftest.run_in_image(client, image, spec)
    item = report[0] if report else {}
    if status != 0 or "vllm_facts" not in item:
        raise PrebakeError(f"could not read vLLM's facts in {image}: "
                           f"{item.get('detail') or stderr.strip()[-2000:] or 'no report'}")
    return item["vllm_facts"]["facts"]


def check(text: str, derived: dict[str, Any], variant: str, path: Path = FILE) -> None:
    """Raise PrebakeError naming the file and the command when `text` is not what the generator writes."""
    if text == render(derived):
        return
    try:
        committed = json.loads(text)
    except ValueError as e:
        committed = {"": f"not JSON: {e}"}
    found = differences(committed, derived) or ["the facts agree but the file is not as the generator writes it"]
    raise PrebakeError(f"{path} does not match vLLM {derived.get('vllm')} of the image:\n"
                       + "\n".join(f"  {line}" for line in found)
                       + f"\nrun `{command(variant)}` (with the build's options) and commit the result")
