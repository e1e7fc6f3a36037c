"""``python -m gramopt.cli``."""

import sys

from . import main

sys.exit(main())
