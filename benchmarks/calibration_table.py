#!/usr/bin/env python3
"""Print the sizing calibration: each figure the bootstrap script measured, and the estimate.

Reads tests/launcher/calibration.toml and the catalogue (entrypoint/models.toml), and prints
the Markdown table of docs/entrypoint.md ("Sizing and its calibration"), then the per-model
basis of the figures:

    python3 benchmarks/calibration_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from entrypoint.launcher.catalogue import load_catalogue  # noqa: E402
from entrypoint.launcher.sizing import kv_pool  # noqa: E402
from entrypoint.launcher.speculation import DRAFT_GIB  # noqa: E402

GPU_NAMES = {46068: "A40", 49140: "RTX 6000 Ada", 48935: "48 GB Blackwell"}


def estimate(row: dict, catalogue: dict) -> tuple[str, str, str]:
    """(measured, estimated, error) as table cells."""
    pool = kv_pool(catalogue[row["model"]], row["gpu_mib"], row["tp"], row["kv"], row["util"], row["spec"],
                   DRAFT_GIB.get(row["spec"], 0.0), row.get("mamba_cache_mode") == "all")
    figure = row["figure"]
    if figure in ("fits", "does_not_fit"):
        fits = pool.fits(row["context"])
        verdict = "fits" if fits else "does not fit"
        ok = fits == (figure == "fits")
        return (f"{row['context']:,} {'fits' if figure == 'fits' else 'does not fit'}",
                f"{verdict} (needs {pool.need_gib(row['context']):.2f} of {pool.kv_gib:.2f} GiB)", "ok" if ok else "WRONG")
    if figure == "tokens":
        value = pool.tokens
        return f"{row['value']:,} tokens", f"{value:,} tokens", f"{value / row['value'] - 1:+.1%}"
    if figure == "kv_gib":
        value = pool.kv_gib / row["tp"]
        return f"{row['value']} GiB KV per GPU", f"{value:.2f} GiB", f"{value / row['value'] - 1:+.1%}"
    value = pool.need_gib(row["context"])
    return (f"{row['value']} GiB for one {row['context']:,}-token request", f"{value:.2f} GiB",
            f"{value / row['value'] - 1:+.1%}")


def main() -> int:
    table = tomllib.loads((ROOT / "tests" / "launcher" / "calibration.toml").read_text())
    catalogue = load_catalogue()
    print("| model | GPUs | TP x DP | KV | util | speculation | measured by the script | estimate | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in table["row"]:
        measured, estimated, error = estimate(row, catalogue)
        gpus = f"{row['tp'] * row['dp']}x {GPU_NAMES.get(row['gpu_mib'], str(row['gpu_mib']) + ' MiB')}"
        spec = row["spec"] + (", Mamba cache all" if row.get("mamba_cache_mode") == "all" else "")
        print(f"| `{row['model']}` | {gpus} | {row['tp']} x {row['dp']} | {row['kv']} | {row['util']} | {spec} | "
              f"{measured} | {estimated} | {error} |")
    print()
    print("| model | weights GiB | KV B/token (16-bit) | non-KV GiB/GPU (+ TP > 1) | state GiB/request | basis |")
    print("| --- | --- | --- | --- | --- | --- |")
    for key, model in catalogue.items():
        tp = f" (+{model.overhead_tp_gib_per_gpu:g})" if model.overhead_tp_gib_per_gpu else ""
        print(f"| `{key}` | {model.weights_gib:g} | {model.kv_bytes_per_token} | {model.overhead_gib_per_gpu:g}{tp} | "
              f"{model.request_state_gib:g} | {model.sizing_basis} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
