"""What ``python -m dashboard`` does before it imports the command line: start the worker.

The commands that run on this machine's runtime worker, each with the options that may send it
elsewhere or need none (another device, an AI Hub import, a snippet): without them, the worker is
started first thing (``runtime.spawn.start_spare``), before the CLI, the client or the protocol is
imported (``dashboard.__main__`` calls ``start_worker_early`` first; ``main`` again, for the
``qnn-lab`` script and for callers), so its interpreter, its imports (numpy, onnxruntime) and the
session it compiles run beside this process's own work instead of after it. A worker nobody adopts
(bad arguments, an answer from the cache) is stopped at exit. This module imports nothing.
"""

from __future__ import annotations

EARLY_WORKER = {"partition": ("--device", "--snippet"), "profile": ("--device", "--aihub"),
                "accuracy": (), "quantize": ()}


def chosen_command(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def start_worker_early(argv: list[str]) -> None:
    """Start the local worker now when the command will surely want one (see ``EARLY_WORKER``)."""
    others = EARLY_WORKER.get(chosen_command(argv) or "")
    if others is None or any(a in ("-h", "--help") or a.split("=", 1)[0] in others for a in argv):
        return
    from dashboard.runtime.spawn import start_spare

    start_spare()
