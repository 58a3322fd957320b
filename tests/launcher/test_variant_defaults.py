"""Every variant's launch defaults (images/*.toml, [launch]) are knobs the launcher accepts."""

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from prebake_testing.hosts import ROOT
from entrypoint.launcher.catalogue import load_catalogue, resolve_model
from entrypoint.launcher.knobs import KNOBS_BY_NAME, resolve

IMAGES = ROOT / "images"
VARIANTS = sorted(p for p in IMAGES.glob("*.toml") if p.name != "common.toml") if IMAGES.is_dir() else []


@pytest.mark.skipif(not VARIANTS, reason="no images/*.toml in this checkout")
@pytest.mark.parametrize("path", VARIANTS, ids=lambda p: p.stem)
def test_variant_launch_defaults_are_valid_knobs(path: Path):
    common = tomllib.loads((IMAGES / "common.toml").read_text()).get("launch", {}) if (IMAGES / "common.toml").exists() else {}
    defaults = {**common, **tomllib.loads(path.read_text()).get("launch", {})}
    unknown = sorted(set(defaults) - set(KNOBS_BY_NAME))
    assert not unknown, f"{path}: [launch] sets {unknown}, which the launcher does not read"
    settings = resolve({}, {k: str(v) for k, v in defaults.items()})  # raises on an invalid value
    resolve_model(settings.value("VL_MODEL"), load_catalogue(), settings.source("VL_MODEL"))
