"""docs/entrypoint.md lists every VL_* knob and every catalogue model."""

from conftest import ROOT
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
