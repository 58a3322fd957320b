"""The launcher's process: `launch.py [--dry-run] [--help] [vllm serve options...]` (the image's ENTRYPOINT).

The launcher itself is the package launcher/ (launcher/main.py); what it hands the bridge is contract.py.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run as a script (/opt/prebake/entrypoint/launch.py): import the package from its parent,
    # and keep this folder off sys.path so that its module names shadow nothing.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_here)] + [p for p in sys.path if os.path.abspath(p or ".") != _here]
    __package__ = os.path.basename(_here)

from .launcher.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
