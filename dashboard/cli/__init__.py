"""``python -m dashboard`` (and the ``qnn-lab`` console script): one module per command, each
owning its arguments; ``main`` dispatches. Never imports Streamlit."""

from dashboard.cli.main import main

__all__ = ["main"]
