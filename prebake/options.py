"""Parsing and checking of option values, shared by the command line.

The checkers are typer callbacks: a bad value is a usage error (typer's usage message, exit status 2),
reported before anything slow starts. They also see values that come from an option's environment variable.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from prebake.errors import PrebakeError
from prebake.references import reference_problem, registry_problem
from prebake.tags import revision_problem


def key_values(items: list[str], option: str) -> dict[str, str]:
    """['A=1', 'B=x=y'] -> {'A': '1', 'B': 'x=y'}; an item without '=' or key is an error naming `option`."""
    parsed = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PrebakeError(f"{option} {item!r}: expected KEY=VALUE")
        parsed[key] = value
    return parsed


def _checked(value, problem: Optional[str]):
    if problem:
        raise typer.BadParameter(f"{value!r}: {problem}")
    return value


def image_reference(value: Optional[str]) -> Optional[str]:
    """An image reference Docker accepts (name[:tag][@digest])."""
    return value if value is None else _checked(value, reference_problem(value))


def registry(value: Optional[str]) -> Optional[str]:
    """A registry namespace (host[:port][/path]) that image names can follow."""
    return value if value is None else _checked(value, registry_problem(value))


def revision(value: Optional[str]) -> Optional[str]:
    return value if value is None else _checked(value, revision_problem(value))


def positive_finite(value: Optional[float]) -> Optional[float]:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value!r}: must be a positive number")
    return value


def image_size_gb(value: Optional[float]) -> Optional[float]:
    positive_finite(value)
    if value is not None and value > 100_000:
        raise typer.BadParameter(f"{value!r}: an image of more than 100000 GB? give the unpacked size in GB")
    return value


def printable(value: Optional[str]) -> Optional[str]:
    if value is not None and (not value.isprintable() or not value.strip()):
        raise typer.BadParameter(f"{value!r}: must be non-empty printable text (no line break or control character)")
    return value


def output_folder(value: Path) -> Path:
    if value.exists() and not value.is_dir():
        raise typer.BadParameter(f"{str(value)!r} is a file, not a folder")
    return value
