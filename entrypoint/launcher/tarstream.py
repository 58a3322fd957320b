"""A tar stream (gzip-compressed or plain) read one 512-byte header at a time, every claim bounded before it is read.

Python's tarfile reads a GNU long-name (`L`, `K`) or PAX (`x`, `g`) header's data whole before anything can look at
its size, and keeps every member it read in `TarFile.members`: a 127 KiB archive that claims a 128 MiB member name
costs the reader 400 MiB. Here each header is parsed from its own block, its size compared with the limits before
its data is read, and nothing is kept from a member once the next is read: the reader's memory is a block, one
extended header (at most MAX_EXTENDED bytes) and one name (at most MAX_NAME), whatever the archive claims.

What it yields is a Member: its name (UTF-8, from a PAX `path`, a GNU `L` header, or the ustar prefix and name), its
type flag, its size, its modification time, and a way to read its data in chunks. Data that the caller does not read
is skipped (read and thrown away: a gzip stream cannot seek). Anything that breaks the format (a bad checksum, a
truncated block, a number that is not one) is Unreadable; anything over a limit is OverLimit. Both say why in words
that name no member in full: the caller decides what of a name it shows.
"""

from __future__ import annotations

import contextlib
import gzip
import re
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

from ..untrusted import open_regular

BLOCK = 512
MAX_NAME = 4096  # bytes of a member's path (Linux's PATH_MAX)
MAX_EXTENDED = 64 << 10  # bytes of one PAX header's records
MAX_EXTENDED_IN_A_ROW = 4  # extended headers before one member (x, g, L, K: one each is what archivers write)
CHUNK = 1 << 20
FILE_TYPES = (b"0", b"\0", b"7")  # regular file, old regular file, contiguous file
DIRECTORY = b"5"
GNU_LONG_NAME, GNU_LONG_LINK = b"L", b"K"
PAX_MEMBER, PAX_GLOBAL = b"x", b"g"
PAX_KEPT = ("path", "linkpath", "size", "mtime")  # every other record is read, checked and dropped
_PAX_RECORD = re.compile(rb"([0-9]{1,8}) ")


class Unreadable(Exception):
    """Not a tar stream, or a broken one (truncated, a bad checksum, a field that is not a number)."""


class OverLimit(Exception):
    """A claim over one of the reader's limits (a name, an extended header, a sparse member)."""


@dataclass(frozen=True)
class Member:
    name: str
    type: bytes  # the header's type flag, one byte
    size: int  # bytes of data that follow (0 for anything but a file)
    mtime: int
    linkname: str
    read: Callable[[int], bytes]  # up to n bytes of its data; b"" at its end

    def isfile(self) -> bool:
        return self.type in FILE_TYPES

    def isdir(self) -> bool:
        return self.type == DIRECTORY

    def islink(self) -> bool:
        return self.type in (b"1", b"2")


@contextlib.contextmanager
def open_stream(path: str) -> Iterator[BinaryIO]:
    """The archive's bytes as a stream: gunzipped when it starts as gzip does, else as they are. The file is opened
    as every file of the volume is (untrusted.open_regular: no link, no FIFO; SetAside otherwise)."""
    with open_regular(path) as source:
        compressed = source.read(2) == b"\x1f\x8b"
        source.seek(0)
        if not compressed:
            yield source
            return
        # GzipFile decompresses in bounded pieces whatever read(n) asks
        with gzip.GzipFile(fileobj=source, mode="rb") as stream:
            yield stream


class _Stream:
    """Exact reads: `take(n)` returns n bytes or raises Unreadable (truncated)."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source

    def take(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            piece = self.source.read(min(left, CHUNK))
            if not piece:
                raise Unreadable(f"it ends in the middle of a member ({n - left} of {n} bytes): truncated")
            parts.append(piece)
            left -= len(piece)
        return b"".join(parts)

    def skip(self, n: int) -> None:
        while n:
            n -= len(self.take(min(n, CHUNK)))


def _padding(size: int) -> int:
    return -size % BLOCK


def _number(field: bytes, what: str) -> int:
    """A header's numeric field: octal (NUL- or space-ended) or GNU base-256 (first byte 0x80, or 0xff: negative)."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        if field[:1] == b"\xff":
            value -= 1 << (8 * (len(field) - 1))
        if value < 0:
            raise Unreadable(f"a header's {what} is negative")
        return value
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not re.fullmatch(rb"[0-7]+", text):
        raise Unreadable(f"a header's {what} is not a number")
    return int(text, 8)


def _checksum_ok(block: bytes) -> bool:
    stored = _number(block[148:156], "checksum")
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    signed = unsigned - sum(256 for byte in block[:148] + block[156:] if byte > 127)  # old tars summed signed bytes
    return stored in (unsigned, signed)


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise OverLimit(f"a member's {what} is not UTF-8") from None


def _pax_records(data: bytes) -> dict[str, str]:
    """The records `LEN key=value\\n` of one PAX header, those in PAX_KEPT; a sparse file's records are refused."""
    kept, at = {}, 0
    while at < len(data) and data[at:at + 1] not in (b"\0", b""):
        found = _PAX_RECORD.match(data, at)
        length = int(found.group(1)) if found else 0
        record = data[at:at + length]
        if not found or length <= len(found.group(0)) or len(record) != length or not record.endswith(b"\n") \
                or b"=" not in record:
            raise Unreadable("a PAX header's records are malformed")
        key, _, value = record[len(found.group(0)):-1].partition(b"=")
        name = _text(key, "PAX record")
        if name.startswith("GNU.sparse."):
            raise OverLimit("it holds a sparse member")
        if name in PAX_KEPT:
            kept[name] = _text(value, name)
        at += length
    return kept


def _pax_number(value: str, what: str, fraction: bool = False) -> int:
    whole = value.split(".", 1)[0] if fraction else value
    if not re.fullmatch(r"[0-9]{1,20}", whole):
        raise Unreadable(f"a PAX header's {what} is not a number")
    return int(whole)


def members(source: BinaryIO) -> Iterator[Member]:
    """Each member of the stream, in order, yielded before any of its data is read: the caller checks its declared
    size first. What the caller left of its data is skipped when it asks for the next."""
    stream = _Stream(source)
    global_pax: dict[str, str] = {}
    pax: dict[str, str] = {}
    long_name = long_link = None
    extended = 0
    while True:
        block = source.read(BLOCK)
        while block and len(block) < BLOCK:  # a gzip stream may return less: read the rest of the block
            more = source.read(BLOCK - len(block))
            if not more:
                break
            block += more
        if not block:
            if extended:
                raise Unreadable("it ends after an extended header: truncated")
            return  # the end of the stream at a header: a tar without its closing zero blocks
        if len(block) < BLOCK:
            raise Unreadable("it ends in the middle of a header: truncated")
        if block == bytes(BLOCK):
            if extended:
                raise Unreadable("an extended header describes no member")
            return
        if not _checksum_ok(block):
            raise Unreadable("a header's checksum is wrong: corrupt")
        kind = block[156:157]
        size = _number(block[124:136], "size")
        if kind in (PAX_MEMBER, PAX_GLOBAL, GNU_LONG_NAME, GNU_LONG_LINK):
            extended += 1
            if extended > MAX_EXTENDED_IN_A_ROW:
                raise OverLimit(f"more than {MAX_EXTENDED_IN_A_ROW} extended headers describe one member")
            limit = MAX_NAME + 1 if kind in (GNU_LONG_NAME, GNU_LONG_LINK) else MAX_EXTENDED  # +1: its ending NUL
            if size > limit:
                raise OverLimit(f"an extended header ({kind.decode()}) declares {size} bytes, over {limit}"
                                if kind in (PAX_MEMBER, PAX_GLOBAL) else
                                f"a member's name is {size} bytes long, over {MAX_NAME}")
            data = stream.take(size)
            stream.skip(_padding(size))
            if kind == GNU_LONG_NAME:
                long_name = _text(data.split(b"\0", 1)[0], "name")
            elif kind == GNU_LONG_LINK:
                long_link = _text(data.split(b"\0", 1)[0], "link")
            else:
                (global_pax if kind == PAX_GLOBAL else pax).update(_pax_records(data))
            continue
        if kind == b"S":
            raise OverLimit("it holds a sparse member")
        records = {**global_pax, **pax}
        name = records.get("path") or long_name
        if name is None:
            name = _text(block[0:100].split(b"\0", 1)[0], "name")
            if block[257:263] == b"ustar\0":  # POSIX ustar: a prefix before the name (GNU's magic uses it otherwise)
                prefix = _text(block[345:500].split(b"\0", 1)[0], "name")
                name = f"{prefix}/{name}" if prefix else name
        if len(name.encode("utf-8")) > MAX_NAME:
            raise OverLimit(f"a member's name is over {MAX_NAME} bytes")
        if "size" in records:
            size = _pax_number(records["size"], "size")
        mtime = _pax_number(records["mtime"], "mtime", fraction=True) if "mtime" in records \
            else _number(block[136:148], "mtime")
        link = records.get("linkpath") or long_link or _text(block[157:257].split(b"\0", 1)[0], "link")
        if kind == b"\0" and name.endswith("/"):
            kind = DIRECTORY  # an old tar's directory
        carries_data = kind in FILE_TYPES or kind not in (DIRECTORY, b"1", b"2", b"3", b"4", b"6")
        size = size if carries_data else 0  # tarfile's rule too: a directory's or a link's size is never data
        pax, long_name, long_link, extended = {}, None, None, 0
        left = [size]

        def read(n: int, left: list[int] = left) -> bytes:
            piece = stream.take(min(n, left[0])) if left[0] else b""
            left[0] -= len(piece)
            return piece

        yield Member(name, kind, size, min(mtime, 1 << 34), link, read)
        stream.skip(left[0])
        stream.skip(_padding(size))
