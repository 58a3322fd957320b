"""The sizing estimator against every figure the bootstrap script measured (calibration.toml).

Each row is checked twice: the estimator itself (entrypoint/launcher/sizing.py with the catalogue's
figures) within 5 %, and the real command line on a fake host of that GPU, which must reach the
same configuration, report the same pool and never choose a context the script saw fail.
"""

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from entrypoint.launcher.catalogue import load_catalogue
from entrypoint.launcher.sizing import GIB, kv_pool
from entrypoint.launcher.speculation import DRAFT_GIB

TABLE = tomllib.loads((Path(__file__).parent / "calibration.toml").read_text())
ROWS = TABLE["row"]
CATALOGUE = load_catalogue()
TOLERANCE = 0.05


def row_id(row: dict) -> str:
    what = row.get("context", row.get("value"))
    return f"{row['model']}-{row['tp']}x{row['dp']}-{row['kv']}-{row['spec']}-{row['util']}-{row['figure']}-{what}"


def pool_of(row: dict):
    return kv_pool(CATALOGUE[row["model"]], row["gpu_mib"], row["tp"], row["kv"], row["util"], row["spec"],
                   DRAFT_GIB.get(row["spec"], 0.0), row.get("mamba_cache_mode") == "all")


def test_table_covers_every_measured_model_and_figure_kind():
    assert {row["model"] for row in ROWS} == {"ornith", "ornithfp8", "ornithnvfp4", "nemotron", "dense", "qwen38nvfp4"}
    assert {row["figure"] for row in ROWS} == {"tokens", "kv_gib", "request_gib", "fits", "does_not_fit"}
    for row in ROWS + TABLE["unchecked"]:
        assert row["lines"] and row["quote"], row
    for row in TABLE["unchecked"]:
        assert row["why"], row


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_estimator_reproduces_the_script(row):
    pool = pool_of(row)
    figure = row["figure"]
    if figure == "fits":
        assert pool.fits(row["context"]), (pool.need_gib(row["context"]), pool.detail)
        return
    if figure == "does_not_fit":
        assert not pool.fits(row["context"]), (pool.need_gib(row["context"]), pool.detail)
        return
    estimate = {"tokens": lambda: pool.tokens,
                "kv_gib": lambda: pool.kv_gib / row["tp"],
                "request_gib": lambda: pool.need_gib(row["context"])}[figure]()
    error = estimate / row["value"] - 1
    assert abs(error) <= TOLERANCE, f"{figure}: estimate {estimate:.4g} vs measured {row['value']} ({error:+.1%}): {pool.detail}"


LAUNCHER_ROWS = [row for row in ROWS if row.get("launcher", True)]


@pytest.mark.parametrize("row", LAUNCHER_ROWS, ids=row_id)
def test_command_line_reaches_the_row_and_respects_it(launcher, row):
    env = {"VL_MODEL": row["model"], "VL_TP": str(row["tp"]), "VL_DP": str(row["dp"]), "VL_KV": row["kv"],
           "VL_UTIL": str(row["util"]), "VL_SPEC": row["spec"], **row.get("env", {})}
    result = launcher.plan(row["host"], env=env, args=row.get("args", []))
    assert result.option("--tensor-parallel-size") == [str(row["tp"])]
    assert result.option("--data-parallel-size") == [str(row["dp"])]
    assert result.option("--gpu-memory-utilization") == [str(row["util"])]
    assert result.option("--kv-cache-dtype") == (None if row["kv"] == "auto" else [row["kv"]])
    spec = result.option("--speculative-config")
    assert (spec is None) == (row["spec"] == "off")
    context = int(result.option("--max-model-len")[0])
    why = result.decision("context")[0]["why"]
    tokens = int(re.search(r"= (\d+) tokens", why).group(1))
    assert tokens == pool_of(row).tokens, why  # the command line sizes with the estimator's figures
    if row["figure"] == "does_not_fit":
        assert context < row["context"], why
    if row["figure"] == "fits":
        assert context >= row["context"], why
    if row["figure"] == "tokens":
        assert abs(tokens / row["value"] - 1) <= TOLERANCE, why
    # Never a context whose request the pool cannot hold.
    assert pool_of(row).fits(context) or context == 131_072, why


def test_dense_at_dp2_on_an_a40_pair_stays_below_the_measured_failure(launcher):
    # The case: 262144 at DP=2 needs 17.79 GiB against 17.56 (bootstrap lines 795-796).
    result = launcher.plan("a40x2_570", env={"VL_MODEL": "dense", "VL_DP": "2"})
    assert result.option("--max-model-len") == ["131072"]


def test_qwen38nvfp4_on_a_48gb_card_stays_below_its_measured_pool(launcher):
    # Launcher defaults (0.93): a pool of ~500 k tokens, below the YaRN ceiling 524288 (line 822).
    result = launcher.plan("rtxpro5000_580", env={"VL_MODEL": "qwen38nvfp4"})
    assert result.option("--max-model-len") == ["262144"]
    assert result.option("--hf-overrides") is None


def test_request_state_counts_at_tensor_parallel_two(launcher):
    # 794 k tokens of pool, but one request of 786432 needs 48 GiB + 1.79 GiB of state pages.
    result = launcher.plan("a40x2_570", env={"VL_MODEL": "dense"})
    assert result.option("--max-model-len") == ["524288"]
    assert "GiB" in result.decision("context")[0]["why"] and "calibrated" in result.decision("context")[0]["why"]


def test_estimates_say_so_in_the_decision(launcher):
    why = launcher.plan("h200_580", env={"VL_MODEL": "qwen"}).decision("context")[0]["why"]
    assert "estimate: never measured by the script" in why


def test_pool_arithmetic_is_per_replica():
    model = CATALOGUE["dense"]
    one = kv_pool(model, 46068, 1, "auto", 0.93, "mtp")
    assert one.kv_gib == pytest.approx(44.988 * 0.93 - (2.78 + 3.7) - 17.8, abs=0.01)
    assert one.need_gib(262_144) == pytest.approx(262_144 * 65536 / GIB + 1.79)


def test_docs_show_the_table_the_benchmark_prints():
    import subprocess
    root = Path(__file__).resolve().parents[2]
    printed = subprocess.run([sys.executable, str(root / "benchmarks" / "calibration_table.py")],
                             capture_output=True, text=True, check=True).stdout
    docs = (root / "docs" / "entrypoint.md").read_text()
    for table in printed.strip().split("\n\n"):
        assert table in docs, "docs/entrypoint.md is out of date: paste `python3 benchmarks/calibration_table.py`"
    for model in CATALOGUE.values():
        assert model.sizing_basis and model.sizing_basis in docs
