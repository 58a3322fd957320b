"""The compile cache's publisher process: `publish_cache.py SPEC_JSON` (launcher/cachepublish.py).

The launcher starts it before vLLM when VL_CACHE_REPO's archive was missing; it waits for vLLM's first
healthy answer, then uploads in the background.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run as a script (/opt/prebake/entrypoint/publish_cache.py), as launch.py is.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))
    __package__ = os.path.basename(_here)

from .launcher.cachepublish import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
