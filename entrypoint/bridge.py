"""The bridge's process: `bridge.py --port 8080 --upstream http://127.0.0.1:18081 [--heartbeat 15]`.

The launcher starts it (launcher/supervise.py, with the arguments contract.py defines); the bridge
itself is the package serving/ (serving/main.py: its command line; serving/app.py: its ASGI chain; each concern a module beside it).
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run as a script (/opt/prebake/entrypoint/bridge.py), as launch.py is.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_here)] + [p for p in sys.path if os.path.abspath(p or ".") != _here]
    __package__ = os.path.basename(_here)

from .serving.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
