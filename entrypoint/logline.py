"""One line of the launcher's, the supervisor's or the bridge's log: a UTC timestamp, a tag, the message.

vLLM stamps its own lines in local time without a year; these carry the date and "Z" so that a
pod's log, a journal upload and the status page line up whatever the host's time zone.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable


def utc_stamp(when: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when))


def stamped(tag: str, message: str, when: float | None = None) -> str:
    return f"{utc_stamp(when)} [{tag}] {message}"


def logger(tag: str) -> Callable[[str], None]:
    """A log function that writes stamped lines to stderr, flushed (the container log keeps their order)."""
    def log(message: str) -> None:
        print(stamped(tag, message), file=sys.stderr, flush=True)
    return log


class UTCFormatter(logging.Formatter):
    converter = time.gmtime


def logging_config(tag: str) -> dict:
    """A logging.dictConfig for a library's own lines (uvicorn's errors in the bridge) in the same form."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"stamped": {"()": UTCFormatter, "fmt": f"%(asctime)s [{tag}] %(levelname)s %(message)s",
                                   "datefmt": "%Y-%m-%dT%H:%M:%SZ"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "stamped", "stream": "ext://sys.stderr"}},
        "loggers": {"uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False}},
    }
