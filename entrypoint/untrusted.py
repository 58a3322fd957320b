"""The one reader of the files the pod finds on its volume or in its cache folders: untrusted, whoever wrote them.

A pod's volume outlives its containers and anyone with the pod (or a bad disk) may leave anything there: a FIFO,
a link, a directory, a huge or deeply nested file, JSON of another shape. A file that may not be used is set
aside: the start goes on as if it were absent, and one line says which file and why (logged once per process, and
listed on the status page: `set_aside_files`). Never an exception, a hang or a traceback.

- Opened with O_NOFOLLOW | O_NONBLOCK: a link is refused, a FIFO or a device never blocks the bridge's event loop
  or the launcher; only a regular file is read.
- At most its kind's max_bytes are read.
- JSON: UTF-8, nested at most max_depth levels (checked before json.loads, which would recurse), and each member
  named in its kind's shape of the type given there (volumefiles.toml: the kinds, as data).
Standard library only: the launcher, the bridge and the publisher use it.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import os
import re
import stat
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from .logline import logger

if sys.version_info >= (3, 11):
    import tomllib
else:  # the image runs 3.12; this keeps older interpreters working
    import tomli as tomllib

KINDS_FILE = Path(__file__).with_name("volumefiles.toml")
TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                      "number": (int, float), "integer": (int,), "boolean": (bool,)}
WHY_SHOWN = 200  # characters of a reason in a line

_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# every byte to -1 (as a signed byte) but the brackets: an opening one to 1, a closing one to -1, the rest to 0
_DEPTH_STEPS = bytes(1 if b in b"[{" else 0xFF if b in b"]}" else 0 for b in range(256))

log = logger("prebake")


class SetAside(Exception):
    """A file that may not be used: the message says why, in a few words."""


@dataclass(frozen=True)
class Kind:
    """One kind of file read from the volume (volumefiles.toml)."""
    name: str
    about: str
    max_bytes: int
    max_depth: int
    shape: dict[str, str]


def _load_kinds(path: Path = KINDS_FILE) -> dict[str, Kind]:
    with open(path, "rb") as handle:
        table = tomllib.load(handle)["kinds"]
    kinds = {name: Kind(name, entry["about"], int(entry["max_bytes"]), int(entry["max_depth"]), dict(entry["shape"]))
             for name, entry in table.items()}
    for kind in kinds.values():
        unknown = sorted({t.rstrip("!") for t in kind.shape.values()} - set(TYPES))
        if unknown:
            raise RuntimeError(f"{path}: kinds.{kind.name}.shape names unknown types {unknown}: use one of {sorted(TYPES)}")
    return kinds


KINDS = _load_kinds()
_set_aside: dict[str, str] = {}  # path -> why, in this process


def open_regular(path: str) -> BinaryIO:
    """A regular file opened for reading without following a link and without blocking on a FIFO or a device.
    FileNotFoundError when nothing is there (or a folder on its way is missing); SetAside for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as err:
        if os.path.islink(path):
            raise SetAside("it is a symbolic link (never followed)") from None
        raise SetAside(f"it cannot be opened ({err.strerror or err})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SetAside(f"it is {_what(mode)}, not a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _what(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"


def read_bytes(path: str, max_bytes: int) -> bytes:
    """A regular file's bytes, at most max_bytes (SetAside past them); FileNotFoundError when absent."""
    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SetAside(f"it is over {max_bytes} bytes")
    return data


def nesting(data: bytes) -> int:
    """How deep a JSON text's arrays and objects nest (brackets inside strings left out), without recursion."""
    steps = _STRINGS.sub(b"", data).translate(_DEPTH_STEPS).replace(b"\x00", b"")
    return max(itertools.accumulate(array("b", steps)), default=0)


def parse_json(data: bytes, kind: Kind) -> object:
    """The JSON value of a file of this kind; SetAside when it is not UTF-8 JSON of the kind's depth and shape."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise SetAside("it is not UTF-8 text") from None
    depth = nesting(data)
    if depth > kind.max_depth:
        raise SetAside(f"it nests {depth} levels deep, over {kind.max_depth}")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise SetAside(f"it is not JSON ({str(err)[:80]})") from None
    check_shape(value, kind.shape)
    return value


def check_shape(value: object, shape: dict[str, str]) -> None:
    """SetAside unless the value is an object whose members named in shape (when present, not null) have their type."""
    if not isinstance(value, dict):
        raise SetAside(f"it holds {_a(_json_type(value))}, not an object")
    for path, kind in shape.items():
        kind, required = kind.rstrip("!"), kind.endswith("!")
        keys = path.split(".")
        for where, found in _members(value, keys):
            if found is None and required:
                raise SetAside(f"its {where} is null, not {_a(kind)}")
            if found is not None and not _is(found, kind):
                raise SetAside(f"its {where} is {_a(_json_type(found))}, not {_a(kind)}")
        if required:  # present in every object that holds it
            for where, holder in _members(value, keys[:-1]):
                if isinstance(holder, dict) and keys[-1] not in holder:
                    raise SetAside(f"{f'its {where}' if where else 'it'} lacks {keys[-1]}")


def _members(value: object, keys: list[str], where: str = ""):
    if not keys:
        yield where, value
        return
    key, rest = keys[0], keys[1:]
    if key == "*":
        items = enumerate(value) if isinstance(value, list) else ()
        for index, item in items:
            yield from _members(item, rest, f"{where}[{index}]")
    elif isinstance(value, dict) and key in value:
        yield from _members(value[key], rest, f"{where}.{key}" if where else key)


def _is(value: object, kind: str) -> bool:
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, TYPES[kind])


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def read_json(path: str, kind: str, report: Callable[[str], None] | None = None) -> object | None:
    """The file's JSON value, checked for its kind (volumefiles.toml); None when it is absent or set aside (one line,
    once per file and reason in this process, through `report` or this module's log)."""
    spec = KINDS[kind]
    try:
        return parse_json(read_bytes(path, spec.max_bytes), spec)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except SetAside as err:
        set_aside(path, str(err), report)
        return None
    except OSError as err:  # a read error of the disk itself
        set_aside(path, f"it cannot be read ({err.strerror or err})", report)
        return None


def set_aside(path: str, why: str, report: Callable[[str], None] | None = None) -> None:
    """Record a file not used, and say so once."""
    why = why[:WHY_SHOWN]
    if _set_aside.get(path) == why:
        return
    _set_aside[path] = why
    (report or log)(f"set aside {path!r}: {why}; going on as if it were absent")


def set_aside_files() -> list[dict]:
    """The files this process set aside, for state.json and the status page."""
    return [{"file": path, "why": why} for path, why in _set_aside.items()]


def open_append(path: str) -> BinaryIO:
    """A log file of the volume opened to append (created if missing), unbuffered: never through a link, never
    blocking on a FIFO (OSError: ELOOP, ENXIO), and refused unless it is a regular file."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return os.fdopen(fd, "ab", buffering=0)


def create_exclusive(path: str, mode: int = 0o644) -> BinaryIO:
    """A new file for writing, never through a link or over anything already there (FileExistsError)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode), "wb")
