"""``python -m websim ...`` is ``raycrawl websim ...``."""

import sys

from raycrawl.cli import main

sys.exit(main(["websim", *sys.argv[1:]]))
