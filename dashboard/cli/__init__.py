"""``python -m dashboard`` (and the ``qnn-lab`` console script): one module per command, each
owning its arguments; ``main`` dispatches. Never imports Streamlit. Nothing is imported with the
package itself: ``early`` must run before the command line is (see there)."""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {"main": "main"})
__all__ = __dir__()
