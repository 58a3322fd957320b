"""What every check shares: its level, and the way it says it does not apply."""

# A stack check's verdict depends only on the stack image (the Python set, the CUDA toolchain):
# prebake records it per stack image id and does not run it again on that stack. A variant check
# depends on the variant's layers (marker, launcher, catalogue) and runs on every build.
STACK = "stack"
VARIANT = "variant"


class Skipped(Exception):
    """A check that does not apply to this image: reported as skipped, with the reason."""
