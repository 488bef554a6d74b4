"""``python -m tierwise``."""

import sys

from tierwise.cli import main

sys.exit(main())
