"""imports: the modules of the lock's key distributions import."""

import importlib

from ..common import STACK

NAME = "imports"
LEVEL = STACK


def check(spec):
    failed = []
    for module in spec["imports"]:
        try:
            importlib.import_module(module)
        except Exception as e:  # any import-time failure is the finding
            failed.append(f"{module}: {e.__class__.__name__}: {e}")
    if failed:
        return False, "; ".join(failed)
    return True, "imported " + ", ".join(spec["imports"])
