"""``python -m dashboard`` (and ``qnn-lab``): the command line for pipelines and scripts.

Each command is a module of this package that owns its arguments (``add_arguments``) and its
``run``; this module only dispatches. Only the module of the command being run is imported, so a
classification costs little more than reading the model, and Streamlit is never imported. Bad
input is one ``error: ...`` line on stderr and exit code 2, never a traceback. Prefix matching of
options is off everywhere: ``--dev`` is an error, never a silent ``--device-report``.

Interrupted (Ctrl-C) or terminated (SIGTERM, SIGHUP; Ctrl-Break on Windows), a command stops its
runtime workers on the way out (their ``with`` blocks run) and ends with one ``error:`` line.

Names from a model or a user (a node called ``\x1b]0;...``, a file name holding a newline) are
printed as text: every control or format character is shown as its escape (``dashboard.printable``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashboard.printable import TerminalText

from dashboard.cli.common import EXIT_USAGE, Parser
from dashboard.cli.early import chosen_command, start_worker_early

# command -> (module, one-line help)
COMMANDS = {
    "classify": ("dashboard.cli.classify", "classify a model as GenAI / NonGenAI / Unknown"),
    "partition": ("dashboard.cli.partition", "which nodes GPU and HTP claim, and migration plans"),
    "profile": ("dashboard.cli.profile", "where the time goes: per-node cost on each backend (or an AI Hub import)"),
    "timeline": ("dashboard.cli.timeline", "serve on a fast backend and hot-migrate to HTP"),
    "accuracy": ("dashboard.cli.accuracy", "does the HTP give the right answer on your data; which layer breaks it"),
    "quantize": ("dashboard.cli.quantize", "a QDQ model for the HTP (ORT's QNN recipe); the mixed-precision search"),
    "report": ("dashboard.cli.report", "one self-contained HTML report: classifier, partitions, timeline"),
    "bench": ("dashboard.cli.bench", "benchmarks: classification vs onnx.load, same run"),
    "sweep": ("dashboard.cli.sweep", "a model zoo x SoCs x setting sets into a results folder; sweep diff, the CI gate"),
    "device": ("dashboard.cli.device", "install the worker on a device; the device doctor"),
    "hash-password": ("dashboard.cli.hash_password", "the password_hash for a team server's dashboard config"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for ``argv``: every command is listed, and the one ``argv`` names gets its
    module's arguments."""
    parser = Parser(prog="python -m dashboard", description="QNN Backend Lab: classify, partition and time ONNX "
                    "models on onnxruntime-qnn's GPU and HTP backends.",
                    allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    chosen = chosen_command(argv)
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        if name == chosen:
            importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from dashboard.errors import UserError
    from dashboard.platform import TERMINATION_EXIT, Terminated, raise_on_termination
    from dashboard.printable import plain

    raise_on_termination()
    stderr: list = []  # the command's stderr stream, once it runs: a line it left open is ended first

    def error(text: str) -> None:
        """The one error line, on a line of its own (Ctrl-C can land mid-way through a progress line)."""
        print(("\n" if stderr and stderr[0].line_open else "") + f"error: {text}", file=sys.stderr)

    try:
        start_worker_early(argv)
        args = build_parser(argv).parse_args(argv)
        from dashboard.cli.common import stderr_progress
        from dashboard.intake.digest import report_digest_progress

        report_digest_progress(stderr_progress())
        with terminal_text() as err:
            stderr.append(err)
            return int(args.run(args) or 0)
    except UserError as exc:
        error(plain(exc))  # one line, even for a path holding a newline
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except Terminated as exc:
        error(f"terminated by {exc.name}")
        return TERMINATION_EXIT.get(exc.name, 1)


def entry() -> None:
    """``python -m dashboard`` and the ``qnn-lab`` script: ``main``, then exit with its code.
    What is alive at the end is frozen first (``gc.freeze``), so the interpreter's last garbage
    collections skip it: a process that ran its one command has nothing left worth collecting,
    and those passes over numpy's, onnx's and the report's objects were about 15 ms of a first
    ``partition`` run. (``main`` itself does not: a test calls it many times in one process.)"""
    code = main()
    gc.freeze()
    sys.exit(code)


@contextlib.contextmanager
def terminal_text() -> Iterator["TerminalText"]:
    """A command's output and progress through ``printable.TerminalText``: names from the model
    or the user reach the terminal as text, never as its control sequences. Yields the stderr one."""
    from dashboard.printable import TerminalText

    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalText(sys.stdout), TerminalText(sys.stderr)
    try:
        yield sys.stderr
    finally:
        sys.stdout, sys.stderr = streams
