"""The one exception type the command line turns into a clear message and a non-zero exit."""


class PrebakeError(Exception):
    """A user-facing error: the message says what is wrong, where, and what to do."""
