"""vLLM's output: to the container log as before, and into a bounded, rotated file the status page reads.

The supervisor starts vLLM with its stdout and stderr on pipes; one thread per pipe copies every
line to the same stream of the container and appends it to `vllm.log` in the run folder, both
with secrets redacted (redact.py). The file rotates at MAX_BYTES, keeping BACKUPS older files;
the previous run's file becomes `vllm.log.1` at start, so the log of the run that ended is still
there after a restart. Lines end at "\\n" or "\\r": a progress bar's updates are lines too.
Nothing here may stop vLLM: a full or read-only disk turns the file off, never the copy.
"""

from __future__ import annotations

import os
import threading
from typing import BinaryIO, Callable, Iterator

from .safetext import safe
from .untrusted import SetAside, open_append, open_regular, set_aside

MAX_BYTES = 16 * 1024 * 1024
BACKUPS = 2
READ_SIZE = 65536
LONGEST_LINE = 65536  # a partial line this long is written as it is


class LogFile:
    """Append-only, thread-safe, rotated; off after the first error (and says so once)."""

    def __init__(self, path: str, log: Callable[[str], None], max_bytes: int = MAX_BYTES,
                 backups: int = BACKUPS) -> None:
        self.path, self.log, self.max_bytes, self.backups = path, log, max_bytes, backups
        self.lock = threading.Lock()
        self.handle: BinaryIO | None = None
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.lexists(path):
                self._shift()
            self.handle = open_append(path)
        except OSError as err:
            self._off(err)

    def _shift(self) -> None:
        for index in range(self.backups, 0, -1):
            older = f"{self.path}.{index - 1}" if index > 1 else self.path
            if os.path.lexists(older):
                os.replace(older, f"{self.path}.{index}")

    def _off(self, err: OSError) -> None:
        self.handle = None
        self.log(f"warning: vLLM's log file {self.path} is off ({err.strerror or err}); vLLM's output still "
                 "reaches the container log")

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.handle is None:
                return
            try:
                if self.handle.tell() + len(data) > self.max_bytes and self.handle.tell() > 0:
                    self.handle.close()
                    self._shift()
                    self.handle = open_append(self.path)
                self.handle.write(data)
            except OSError as err:
                self._off(err)

    def close(self) -> None:
        with self.lock:
            if self.handle is not None:
                self.handle.close()
                self.handle = None


def split_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (each with its "\\n" or "\\r") and the rest."""
    lines, start = [], 0
    for index, byte in enumerate(buffer):
        if byte in (10, 13):
            lines.append(buffer[start:index + 1])
            start = index + 1
    return lines, buffer[start:]


def redact_line(line: bytes, redact: Callable[[str], str]) -> bytes:
    """One line as the container log and the file get it: secrets masked, control characters inside it escaped
    (safetext.safe: a prompt vLLM logs cannot send a terminal escape); its own ending kept."""
    text = line.decode("utf-8", "replace")
    body = text.rstrip("\r\n")
    clean = safe(body, None, redact) + text[len(body):]
    return line if clean == text else clean.encode("utf-8")


def pump(source: BinaryIO, sink: int, logfile: LogFile | None, redact: Callable[[str], str]) -> None:
    """Copy a pipe to a stream and the log file until end of file (vLLM and its workers closed it)."""
    rest, fd = b"", source.fileno()
    while True:
        try:
            chunk = os.read(fd, READ_SIZE)  # what is there now, not a full buffer: lines go out as they come
        except OSError:
            chunk = b""
        lines, rest = split_lines(rest + chunk)
        if not chunk and rest:
            lines, rest = lines + [rest], b""
        elif len(rest) >= LONGEST_LINE:
            lines, rest = lines + [rest], b""
        if lines:
            data = b"".join(redact_line(line, redact) for line in lines)
            try:
                os.write(sink, data)
            except OSError:
                pass  # the container's log is gone: keep draining, or vLLM would block on a full pipe
            if logfile is not None:
                logfile.write(data)
        if not chunk:
            source.close()
            return


def capture(stdout: BinaryIO, stderr: BinaryIO, logfile: LogFile | None, redact: Callable[[str], str]) -> list[threading.Thread]:
    """Start the two copying threads for a child's stdout and stderr pipes."""
    threads = [threading.Thread(target=pump, args=(pipe, sink, logfile, redact), name=f"vllm-{name}", daemon=True)
               for pipe, sink, name in ((stdout, 1, "stdout"), (stderr, 2, "stderr"))]
    for thread in threads:
        thread.start()
    return threads


class Follower:
    """Reads the lines appended to a log file since the last call, across a rotation (the bridge's side; it
    reads every half second, and a rotation comes every MAX_BYTES)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.handle: BinaryIO | None = None
        self.rest = b""

    def _open(self) -> bool:
        try:
            self.handle = open_regular(self.path)  # a FIFO put there never blocks the bridge's event loop
        except SetAside as err:
            set_aside(self.path, str(err))
            self.handle = None
        except OSError:
            self.handle = None
        self.rest = b""
        return self.handle is not None

    def lines(self) -> Iterator[str]:
        if self.handle is None and not self._open():
            return
        while True:
            chunk = self.handle.read(READ_SIZE)
            if chunk:
                found, self.rest = split_lines(self.rest + chunk)
                for line in found:
                    text = line.decode("utf-8", "replace").rstrip("\r\n")
                    if text.strip():
                        yield text
                continue
            try:  # at the end: has the writer moved on to a new file?
                rotated = os.stat(self.path).st_ino != os.fstat(self.handle.fileno()).st_ino
            except OSError:
                rotated = False
            if not rotated:
                return
            self.handle.close()
            if not self._open():
                return
