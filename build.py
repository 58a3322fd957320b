#!/usr/bin/env python3
"""prebake's one command: `./build.py --variant a40` builds that image; `./build.py --help` lists the rest."""

import sys

from prebake.cli import main

if __name__ == "__main__":
    sys.exit(main())
