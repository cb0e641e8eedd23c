import sys

from raycrawl.cli import main

sys.exit(main())
