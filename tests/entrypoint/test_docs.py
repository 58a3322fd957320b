"""docs/entrypoint.md lists every VL_* knob and every catalogue model."""

from prebake_testing.hosts import ROOT
from entrypoint.launcher.catalogue import load_catalogue
from entrypoint.launcher.knobs import KNOBS, RETIRED_KNOBS

DOC = (ROOT / "docs" / "entrypoint.md").read_text()


def test_every_knob_is_documented():
    missing = [k.name for k in KNOBS if f"| `{k.name}` |" not in DOC]
    assert not missing
    assert not [name for name in RETIRED_KNOBS if f"`{name}`" not in DOC]


def test_every_model_is_documented():
    for model in load_catalogue().values():
        assert f"| `{model.key}` | `{model.repo}` |" in DOC


def test_the_exit_codes_are_the_contracts_in_the_help_and_the_docs():
    import re

    from entrypoint import contract
    from entrypoint.launcher.usage import EXIT_CODES

    codes = {value for name, value in vars(contract).items() if name.startswith("EXIT_")}
    assert sorted(code for code, _ in EXIT_CODES) == sorted(codes | {0})  # --help's table
    table = DOC[DOC.index("| exit | meaning |"):]
    table = table[:table.index("\n\n")]
    assert sorted(int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)) == sorted(codes | {0})
