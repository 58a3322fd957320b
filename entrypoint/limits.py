"""The open-file limit: Docker's default soft limit (1024) is far below its hard limit, and every client
connection of the bridge, every upstream connection and every file of vLLM takes one. The launcher and the
bridge raise the soft limit to the hard one at start (vLLM does the same for itself); the bridge then caps
its client connections below it (serving/frontdoor.py), so that idle connections cannot use them all up.
Stdlib only, like the launcher.
"""

from __future__ import annotations

try:
    import resource
except ImportError:  # not on Linux: nothing to raise
    resource = None  # type: ignore[assignment]

MAX_CONNECTIONS = 4096  # client connections the bridge keeps open at most, whatever the limit
RESERVED_FILES = 64  # at least this many files stay for vLLM's connections, logs, imports


def raise_open_files() -> int | None:
    """Soft RLIMIT_NOFILE up to the hard limit; the soft limit now (None where it cannot be read)."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return None if soft == resource.RLIM_INFINITY else soft


def connection_cap(open_files: int | None) -> int:
    """Client connections the bridge keeps: three quarters of the open-file limit (the rest for its
    connections to vLLM and its own files), at most MAX_CONNECTIONS."""
    if open_files is None:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, open_files * 3 // 4, open_files - RESERVED_FILES))
