"""docs/entrypoint.md lists every VL_* knob and every catalogue model; every knob table in docs/ is the code's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from prebake_testing.hosts import ROOT
from entrypoint.launcher.catalogue import load_catalogue
from entrypoint.launcher.knobs import KNOBS, KNOBS_BY_NAME, RETIRED_KNOBS

DOC = (ROOT / "docs" / "entrypoint.md").read_text()


def test_every_knob_is_documented():
    missing = [k.name for k in KNOBS if f"| `{k.name}` |" not in DOC]
    assert not missing
    assert not [name for name in RETIRED_KNOBS if f"`{name}`" not in DOC]


def test_every_model_is_documented():
    for model in load_catalogue().values():
        assert f"| `{model.key}` | `{model.repo}` |" in DOC


def test_the_exit_codes_are_the_contracts_in_the_help_and_the_docs():
    from entrypoint import contract
    from entrypoint.launcher.usage import EXIT_CODES

    codes = {value for name, value in vars(contract).items() if name.startswith("EXIT_")}
    assert sorted(code for code, _ in EXIT_CODES) == sorted(codes | {0})  # --help's table
    tables = {}  # every "| exit | ..." table of README.md and docs/ (entrypoint.md, troubleshooting.md)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for start in [m.start() for m in re.finditer(r"^\| exit \|", text, re.M)]:
            table = text[start:]
            table = table[:table.index("\n\n")] if "\n\n" in table else table
            tables[page.name] = sorted(int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M))
    assert {"entrypoint.md", "troubleshooting.md"} <= set(tables), tables
    assert {page: found for page, found in tables.items() if found != sorted(codes | {0})} == {}


# --- the knob tables in docs/*.md against knobs.py ----------------------------------------------------------
# docs/entrypoint.md's table is knobs.py's KNOBS in words: every knob once, its meaning and accepted values as
# the code states them (the page may add backticks and links to other pages), its default. Other pages' tables
# (bridge, status, swap) explain a few knobs in their own words: their defaults must still be the code's, and a
# variant's default they quote must be that variant's (images/*.toml, [launch]).

EMPTY_DEFAULTS = ("", "(decided)", "(empty)", "(auto)", "(none)")  # how the pages say "the launcher decides"
VARIANT_NOTE = re.compile(r"(\w+): `([^`]*)`")
SHORTENED = re.compile(r"one of vLLM 0\.27\.1's --[\w-]+ choices: (?P<some>[\w, ]+), \.\.\. "
                       r"\(`entrypoint/launcher/knobs\.py` (?P<name>[A-Z_]+)\)")


def knob_tables(text: str) -> list[list[dict[str, str]]]:
    """Each table whose first column is "variable": its rows as {column: cell}, `\\|` read as |."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("| variable |"):
            continue
        columns = [c.strip() for c in line.strip().strip("|").split("|")]
        rows = []
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]
            rows.append(dict(zip(columns, cells)))
        tables.append(rows)
    return tables


def plain(text: str) -> str:
    """A cell as knobs.py words it: without backticks, and without the page's pointers to other pages."""
    text = text.replace("`", "")
    text = re.sub(r'\s*\((?:see "[^"]+"|\[[^\]]*\]\([^)]*\)|docs/[\w.-]+\.md)\)', "", text)
    return re.sub(r";\s*docs/[\w.-]+\.md(?=\))", "", text).strip()


def default_problem(name: str, cell: str) -> str | None:
    from prebake.variants import load_variants

    knob = KNOBS_BY_NAME[name]
    if not knob.default:
        return None if cell in EMPTY_DEFAULTS else f"{name}: the page says {cell!r}, knobs.py has no default"
    match = re.fullmatch(r"`([^`]*)`(.*)", cell)
    if not match or match[1] != knob.default:
        return f"{name}: the page says {cell!r}, knobs.py {knob.default!r}"
    variants = load_variants(ROOT / "images")
    for variant, value in VARIANT_NOTE.findall(match[2]):
        if variant not in variants or variants[variant].launch_defaults.get(name) != value:
            return f"{name}: the page says {variant} defaults to {value!r}, images/{variant}.toml does not"
    return None


def named_knob_rows(text: str) -> list[dict[str, str]]:
    return [row for table in knob_tables(text) for row in table if re.fullmatch(r"`VL_\w+`", row["variable"])]


def page_problems(text: str) -> list[str]:
    """Rows naming no knob of knobs.py, and defaults other than the code's."""
    problems = []
    for row in named_knob_rows(text):
        name = row["variable"].strip("`")
        if name not in KNOBS_BY_NAME:
            problems.append(f"{name}: not a knob of knobs.py")
        elif "default" in row:
            problems.append(default_problem(name, row["default"]))
    return [p for p in problems if p]


def test_the_knob_table_is_knobs_py_in_words():
    import entrypoint.launcher.knobs as knobs_module

    rows = named_knob_rows(DOC)
    names = [row["variable"].strip("`") for row in rows]
    assert sorted(names) == sorted(k.name for k in KNOBS), "every knob once, and nothing else"
    problems = []
    for row in rows:
        knob = KNOBS_BY_NAME[row["variable"].strip("`")]
        if plain(row["meaning"]) != knob.meaning:
            problems.append(f"{knob.name} meaning: page {plain(row['meaning'])!r}, knobs.py {knob.meaning!r}")
        shortened = SHORTENED.fullmatch(row["accepted values"])
        if shortened:  # a long list of vLLM's choices: some named, then the tuple the code takes
            choices = getattr(knobs_module, shortened["name"])
            if "|".join(choices) != knob.accepted or not set(shortened["some"].split(", ")) <= set(choices):
                problems.append(f"{knob.name} accepted: {row['accepted values']!r} is not {knob.accepted!r}")
        elif plain(row["accepted values"]) != knob.accepted:
            problems.append(f"{knob.name} accepted: page {plain(row['accepted values'])!r}, knobs.py {knob.accepted!r}")
        problems.append(default_problem(knob.name, row["default"]))
    assert not [p for p in problems if p], "\n".join(p for p in problems if p)


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_knob_table_gives_the_launchers_defaults(page: Path):
    problems = page_problems(page.read_text())
    assert not problems, "\n".join(problems)


def test_the_knob_table_checks_can_fail():
    """A changed default, a variant's default the variant does not set, a row for a knob that went."""
    page = ("| variable | default | meaning |\n| --- | --- | --- |\n| `VL_SEQS` | `65` | x |\n"
            "| `VL_SWAP` | `off` (blackwell: `ornith:other`) | x |\n| `VL_CTX` | `4096` | x |\n"
            "| `VL_GONE` | `1` | x |\n| `VL_BATCHED` | `8192` | x |\n")
    assert [p.split(":")[0] for p in page_problems(page)] == ["VL_SEQS", "VL_SWAP", "VL_CTX", "VL_GONE"]
