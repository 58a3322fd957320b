"""One line of the launcher's, the supervisor's or the bridge's log: a UTC timestamp, a tag, the message.

vLLM stamps its own lines in local time without a year; these carry the date and "Z" so that a
pod's log, a journal upload and the status page line up whatever the host's time zone.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable

from .safetext import safe

# The longest line the bridge logs (safetext.safe caps each outside text far below; this bounds the sum).
LINE_LIMIT = 16 << 10
_cleaners: list[Callable[[str], str]] = []  # what every line of this process goes through (set_cleaner)


def escape_controls(text: str) -> str:
    """Control characters (a request's path decoded from %0D%0A, a header) would let a client write lines of its
    choosing into the container log: shown escaped, \\x0d\\x0a (safetext.safe, uncut)."""
    return safe(text, None)


def utf8(text: str) -> bytes:
    """Text as UTF-8 for a page or an upload, whatever it holds: a lone surrogate (a non-UTF-8 container argument
    through os.fsdecode, an escaped \\ud800 in a JSON answer) becomes its backslash escape instead of an error."""
    return text.encode("utf-8", "backslashreplace")


def set_cleaner(clean: Callable[[str], str]) -> None:
    """Every line this process logs from now on (its log functions, and every logging record, whichever
    handler prints it: uvicorn's, huggingface_hub's own) goes through `clean` (the bridge: safetext.safe with
    its redactor)."""
    if not _cleaners:
        make_record = logging.getLogRecordFactory()

        def cleaned_record(*args, **kwargs) -> logging.LogRecord:
            record = make_record(*args, **kwargs)
            try:
                record.msg, record.args = cleaned(record.getMessage()), None
            except Exception:  # noqa: BLE001 - a malformed record is logging's to report, as without us
                pass
            return record

        logging.setLogRecordFactory(cleaned_record)
    _cleaners[:] = [clean]


def cleaned(message: str) -> str:
    for clean in _cleaners:
        message = clean(message)
    return message


def utc_stamp(when: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when))


def stamped(tag: str, message: str, when: float | None = None) -> str:
    return f"{utc_stamp(when)} [{tag}] {cleaned(message)}"


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
