"""GPU memory per GPU, from nvidia-smi (VL_NVIDIA_SMI, as the launcher's probe uses): the status page's "gpus"."""

from __future__ import annotations

import asyncio

QUERY = ("--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits")
TIMEOUT_S = 5.0


def parse(text: str) -> list[dict]:
    gpus = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 4:
            continue
        index, name, used, total = fields
        try:
            gpus.append({"index": int(index), "name": name, "memory_used_mib": int(used),
                         "memory_total_mib": int(total)})
        except ValueError:
            continue
    return gpus


async def query(nvidia_smi: str) -> tuple[list[dict], str | None]:
    """(GPUs, None) or ([], why not): a missing or hung nvidia-smi must not hold the status page."""
    try:
        process = await asyncio.create_subprocess_exec(nvidia_smi, *QUERY, stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.PIPE)
    except OSError as err:
        return [], f"cannot run {nvidia_smi}: {err.strerror or err}"
    try:
        out, err = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return [], f"{nvidia_smi} did not answer within {TIMEOUT_S:g} s"
    if process.returncode != 0:
        return [], f"{nvidia_smi} exited with {process.returncode}: {err.decode(errors='replace').strip()[:200]}"
    return parse(out.decode(errors="replace")), None
