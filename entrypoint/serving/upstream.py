"""What the bridge sends vLLM for a client's request: the URL it connects to, and the headers.

The URL is vLLM's fixed address plus the request's path and query, never anything a client can turn
into another address. The headers are the client's, less those that describe one connection, and
with the forwarding headers decided here rather than taken on trust:
- `Host` is the client's (the pod's public name): vLLM's redirects then point where the client can
  follow them, and its logs name the host the client asked for;
- a client's own `Forwarded`, `X-Forwarded-*` and `X-Real-IP` are dropped: vLLM's uvicorn trusts
  forwarding headers from 127.0.0.1, which is the bridge, so passing them would let any client
  choose the address vLLM logs;
- `X-Forwarded-For` is set to the address the bridge's connection came from (RunPod's proxy, or the
  client on a TCP port): what vLLM logs as the client. No `X-Forwarded-Proto`: the bridge cannot
  know whether the hop before it was HTTPS, so vLLM sees http.
"""

from __future__ import annotations

from yarl import URL

# Not forwarded: they describe one connection, not the message (RFC 9110 7.6.1). content-length is
# decided per request by the relay (kept when the client sent one, so vLLM reads the same framing).
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
                        b"upgrade", b"expect", b"content-length", b"proxy-authorization"})
FORWARDING = frozenset({b"forwarded", b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto",
                        b"x-forwarded-port", b"x-forwarded-prefix", b"x-real-ip"})


def upstream_url(base: URL, raw_path: bytes, query: bytes) -> URL | None:
    """vLLM's URL for an origin-form target, or None for anything else."""
    if not raw_path.startswith(b"/") or not raw_path.isascii() or not query.isascii():
        return None
    url = URL.build(scheme=base.scheme, host=base.host or "", port=base.port, path=raw_path.decode("ascii"),
                    query_string=query.decode("ascii"), encoded=True)
    if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port):
        return None  # cannot happen with a path that starts with "/"; checked all the same
    return url


def header_text(value: bytes) -> str:
    # aiohttp writes header values as UTF-8: a UTF-8 value decoded as such reaches vLLM byte for byte.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def upstream_headers(headers: list[tuple[bytes, bytes]], peer: str | None) -> list[tuple[str, str]]:
    named_by_connection = set()
    for name, value in headers:
        if name == b"connection":  # options a client marks as this connection's own (RFC 9110 7.6.1)
            named_by_connection.update(token.strip().lower() for token in value.split(b","))
    sent = [(name.decode("latin-1"), header_text(value)) for name, value in headers
            if name not in HOP_BY_HOP and name not in FORWARDING and name not in named_by_connection]
    if peer:
        sent.append(("X-Forwarded-For", peer))
    return sent
