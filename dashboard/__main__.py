"""Entry point of ``python -m dashboard``."""

import sys

from dashboard.cli.main import main

sys.exit(main())
