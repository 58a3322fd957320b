"""pins: every package of the lock is installed at exactly its locked version."""

from importlib import metadata

from ..common import STACK

NAME = "pins"
LEVEL = STACK


def check(spec):
    wrong = []
    for name, pinned in sorted(spec["pins"].items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} is not installed (lock: {pinned})")
            continue
        if installed != pinned:
            wrong.append(f"{name} {installed} installed, lock pins {pinned}")
    if wrong:
        return False, "; ".join(wrong)
    return True, f"{len(spec['pins'])} packages at their locked versions"
