"""What both push paths share (the engine's gzip push in publish.py, skopeo's zstd push in skopeo.py):
the credentials' variables, the silence time-out, and how a failure is worded."""

import os

from prebake.errors import PrebakeError

USER_VARIABLE = "PREBAKE_REGISTRY_USER"
PASSWORD_VARIABLE = "PREBAKE_REGISTRY_PASSWORD"
# The longest a push may go without a sign of life: a word from the Docker Engine (progress arrives every second
# or so while layers upload), or bytes moving in or out of skopeo. Longer means a registry that stopped answering.
TIMEOUT_VARIABLE = "PREBAKE_PUSH_TIMEOUT_S"
DEFAULT_PUSH_TIMEOUT_S = 120.0
# Words of the Docker Engine's and skopeo's errors that mean the registry was never reached, so credentials are
# not the cause.
UNREACHABLE = ("connection refused", "no such host", "i/o timeout", "network is unreachable", "dial tcp",
               "server gave http response to https client", "tls: ", "connection reset")


def push_timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_VARIABLE, "")
    if not raw:
        return DEFAULT_PUSH_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 10**6:
        raise PrebakeError(f"{TIMEOUT_VARIABLE}={raw!r}: expected a number of seconds, like 300")
    return value


def redact(text: str, auth: dict[str, str] | None) -> str:
    if auth and auth.get("password"):
        text = text.replace(auth["password"], "***")
    return text


def unreachable(error: str) -> bool:
    return any(word in error.lower() for word in UNREACHABLE)


def advice(error: str) -> str:
    if unreachable(error):
        return "The registry could not be reached: check its address (--registry / PREBAKE_REGISTRY) and network."
    return f"Check the registry name and its credentials ({USER_VARIABLE}/{PASSWORD_VARIABLE}, or `docker login`)."


def refused_message(ref: str, error: str) -> str:
    """`error`: already redacted."""
    return (("could not reach the registry for " if unreachable(error) else "the registry refused ")
            + f"{ref}: {error}. {advice(error)}")


def hung_message(ref: str, seconds: float) -> str:
    return (f"pushing {ref}: the registry sent nothing for {seconds:g} s (a hung upload); stopped, no short tag "
            f"moved. Check the registry, or set {TIMEOUT_VARIABLE} to wait longer (default {DEFAULT_PUSH_TIMEOUT_S:g})")
