"""Entry point of ``python -m dashboard``."""

import sys

from .cli import main

sys.exit(main())
