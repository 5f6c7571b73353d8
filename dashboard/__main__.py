"""Entry point of ``python -m dashboard``."""

from dashboard.cli.main import entry

entry()
