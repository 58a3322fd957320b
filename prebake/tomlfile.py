"""Read a TOML file, turning a syntax error into a message that names the file."""

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from prebake.errors import PrebakeError


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise PrebakeError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise PrebakeError(f"{path}: not valid TOML ({e}); fix the syntax and run again") from None
