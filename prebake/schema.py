"""Check a TOML table against the keys it may hold, with errors that name the file and key."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from prebake.errors import PrebakeError


@dataclass(frozen=True)
class Key:
    kind: str  # "str", "bool", "int", "table", "str-list", "str-table" (a table of strings or integers),
    #            "list-table" (a table of lists of strings)
    expected: str  # what a good value looks like, for the error message
    required: bool = True


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "table":
        return isinstance(value, dict)
    if kind == "str-list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "str-table":
        return isinstance(value, dict) and all(
            isinstance(v, (str, int)) and not isinstance(v, bool) for v in value.values()
        )
    if kind == "list-table":
        return isinstance(value, dict) and all(
            isinstance(v, list) and all(isinstance(item, str) for item in v) for v in value.values()
        )
    raise ValueError(f"unknown schema kind {kind!r}")


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def check_table(
    path: Path, where: str, table: Mapping[str, Any], schema: Mapping[str, Key], *, all_optional: bool = False
) -> None:
    """Raise PrebakeError for the first unknown, missing or mistyped key of `table`.

    `where` is the table's dotted name inside the file ("" for the top level).
    """
    prefix = f"{where}." if where else ""
    for key, value in table.items():
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise PrebakeError(f"{path}: unknown key '{prefix}{key}'; the keys allowed here are: {known}")
        spec = schema[key]
        if not _type_ok(spec.kind, value):
            raise PrebakeError(
                f"{path}: key '{prefix}{key}' must be {spec.expected}, not {_type_name(value)} ({value!r})"
            )
    if all_optional:
        return
    for key, spec in schema.items():
        if spec.required and key not in table:
            raise PrebakeError(f"{path}: missing key '{prefix}{key}': expected {spec.expected}")
