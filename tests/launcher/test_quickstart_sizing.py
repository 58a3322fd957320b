"""docs/quickstart.md's "1 or 2 A40s" table says what the launcher chooses on those hosts today."""

from __future__ import annotations

import re

import pytest

from prebake_testing.hosts import ROOT

TABLE_ROW = re.compile(r"^\| (\d) \| (\d) \| ([\d,]+) tokens \| about ([\d,]+) tokens", re.M)


def quickstart_rows() -> dict[int, tuple[int, int, int]]:
    text = (ROOT / "docs" / "quickstart.md").read_text()
    return {int(gpus): (int(tp), int(ctx.replace(",", "")), int(pool.replace(",", "")))
            for gpus, tp, ctx, pool in TABLE_ROW.findall(text)}


@pytest.mark.parametrize("gpus, profile", [(1, "a40x1_580"), (2, "a40x2_570")])
def test_the_a40_table_matches_the_launcher(launcher, gpus: int, profile: str) -> None:
    tp, context, pool = quickstart_rows()[gpus]
    plan = launcher.plan(profile)
    assert plan.option("--tensor-parallel-size") == [str(tp)]
    assert plan.option("--max-model-len") == [str(context)]
    [decision] = plan.decision("context")
    tokens = int(re.search(r"= (\d+) tokens", decision["why"]).group(1))
    assert abs(tokens - pool) / tokens < 0.01, (tokens, pool)
