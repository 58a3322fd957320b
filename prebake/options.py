"""Parsing shared by the command line's repeatable KEY=VALUE options."""

from prebake.errors import PrebakeError


def key_values(items: list[str], option: str) -> dict[str, str]:
    """['A=1', 'B=x=y'] -> {'A': '1', 'B': 'x=y'}; an item without '=' or key is an error naming `option`."""
    parsed = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PrebakeError(f"{option} {item!r}: expected KEY=VALUE")
        parsed[key] = value
    return parsed
