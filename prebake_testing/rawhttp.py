"""Raw bytes to a server and its answer, for requests no HTTP client library would send."""

from __future__ import annotations

import socket
import threading
import time


def exchange(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send `data`, then read until the server closes or `timeout` passes; the raw answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if answer_complete(b"".join(chunks)):
                break
        return b"".join(chunks)


def answer_complete(raw: bytes) -> bool:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.endswith(b"0\r\n\r\n")


def status_of(raw: bytes) -> int | None:
    parts = raw.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and raw.startswith(b"HTTP/") and parts[1].isdigit() else None


def body_of(raw: bytes) -> bytes:
    return raw.partition(b"\r\n\r\n")[2]


class Listener:
    """A TCP port that records every connection made to it: anything but vLLM the bridge might reach."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nELSEWHERE")
            conn.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()
