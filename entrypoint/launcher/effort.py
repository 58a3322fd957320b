"""The effort table: thinking.toml's token budget for each effort level, and VL_EFFORT_BUDGETS's overrides of it.

Its own module because both the knobs (VL_EFFORT_BUDGETS's parser) and the thinking decision (thinking.py) read it,
and thinking.py reads the knobs' Settings: the table sits below both. Stdlib only, like the launcher.
"""

from __future__ import annotations

import os
import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # the image runs 3.12; this keeps older interpreters working
    import tomli as tomllib

# entrypoint/: the data files sit beside launch.py, where the build side reads them too
TABLE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "thinking.toml")
MAX_BUDGET = 2**31 - 1  # vLLM keeps it in a 32-bit field


def default_budgets(path: str = TABLE_PATH) -> dict[str, int]:
    with open(path, "rb") as handle:
        return dict(tomllib.load(handle)["budgets"])


def parse_overrides(text: str, levels: tuple[str, ...]) -> dict[str, int]:
    """"low=1024 high=24000" -> {"low": 1024, "high": 24000}; ValueError says what is wrong."""
    overrides = {}
    for item in text.split():
        level, _, tokens = item.partition("=")
        if level not in levels:
            raise ValueError(f"{item!r}: the level must be one of {', '.join(levels)}")
        if not re.fullmatch(r"[0-9]{1,10}", tokens) or int(tokens) > MAX_BUDGET:
            raise ValueError(f"{item!r}: the budget must be a whole number of tokens, 0 to {MAX_BUDGET}")
        overrides[level] = int(tokens)
    if not overrides:
        raise ValueError("give at least one level=tokens")
    return overrides
