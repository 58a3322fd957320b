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
    except IsADirectoryError:
        raise PrebakeError(f"{path}: is a folder, not a TOML file; rename or remove it") from None
    except OSError as e:
        raise PrebakeError(f"{path}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise PrebakeError(f"{path}: not UTF-8 text (byte {e.start} is {e.object[e.start:e.start + 1]!r}); "
                           "TOML files are UTF-8: re-save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise PrebakeError(f"{path}: not valid TOML ({e}); fix the syntax and run again") from None
