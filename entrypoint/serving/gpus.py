"""GPU memory per GPU, from nvidia-smi (VL_NVIDIA_SMI, as the launcher's probe uses; run and read by
../nvidiasmi.py, as every reader does): the status page's "gpus"."""

from __future__ import annotations

import re

from .. import nvidiasmi

FIELDS = ("index", "name", "memory.used", "memory.total")
TIMEOUT_S = 5.0
_NUMBER = re.compile(r"[0-9]{1,9}")  # ASCII: int() also reads "٣" and "1_0"


def parse(text: str) -> list[dict]:
    """nvidia-smi's answer to FIELDS; a line that is not one GPU's (a warning, "[N/A]") is left out."""
    return _gpus(nvidiasmi.rows(text, len(FIELDS))[0])


def _gpus(rows: list[list[str]]) -> list[dict]:
    return [{"index": int(index), "name": name, "memory_used_mib": int(used), "memory_total_mib": int(total)}
            for index, name, used, total in rows
            if _NUMBER.fullmatch(index) and _NUMBER.fullmatch(used) and _NUMBER.fullmatch(total)]


async def query(nvidia_smi: str) -> tuple[list[dict], str | None]:
    """(GPUs, None) or ([], why not): a missing or hung nvidia-smi must not hold the status page."""
    rows, problem = await nvidiasmi.query_async(nvidia_smi, FIELDS, TIMEOUT_S)
    return _gpus(rows), problem
