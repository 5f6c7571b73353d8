"""What several commands share: the parser that fails in one line, the knobs that decide what QNN
claims (``partition`` and ``timeline``), and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one ``error:`` line with exit code 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        from dashboard.printable import plain

        print(f"error: {plain(message)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """The knobs that decide what QNN claims (shared by partition and timeline)."""
    from dashboard.runtime.socs import SOCS

    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                        help="fix a symbolic dimension (repeatable); batch=1 and sequence "
                             "lengths are pre-filled")
    parser.add_argument("--fp16", action="store_true", help="run float models in HTP fp16 precision")
    parser.add_argument("--soc", metavar="NAME",
                        help="Snapdragon SoC to compile for: " + ", ".join(s.key for s in SOCS)
                             + " (or a QNN soc_model number)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra QNN provider option (repeatable); checked against the EP's own options: "
                             "an unknown key or a value it would ignore is refused with the valid values; a "
                             "library or output path must be absolute and pass its check on this machine "
                             "(a remote --device's paths are its own, not checked)")
    parser.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                        help="give up on the runtime worker after this long")


def provider_options(args: argparse.Namespace) -> dict[str, str]:
    """``--option K=V`` items, checked as the terminal's (``access.TERMINAL``): options that load a
    library or write a file are kept, with their paths checked on this machine, or, for a remote
    ``--device``, a note on stderr that they are the device's paths and were not checked."""
    from dashboard.access import TERMINAL
    from dashboard.partition.analysis import parse_assignments
    from dashboard.runtime import qnn_options
    from dashboard.runtime.devices import Device

    options = parse_assignments(args.option, "--option")
    device = Device.parse(getattr(args, "device", None) or "local", source=TERMINAL)
    for note in qnn_options.check(options, origin=TERMINAL, remote=None if device.is_local else device.label):
        print(f"note: {note}", file=sys.stderr, flush=True)
    return options


MAX_SECONDS = 7 * 24 * 3600


def seconds(text: str) -> float:
    """An argparse type for ``--timeout``: a positive, finite number of seconds, at most a week.
    Why: ``nan`` or ``-5`` would make every wait end at once, ``inf`` overflowed a deadline."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_SECONDS:  # false for nan too
        raise argparse.ArgumentTypeError(f"must be a number of seconds between 0 and {MAX_SECONDS:,} (a week), "
                                         f"got {text!r}")
    return value


PROGRESS_FROM_BYTES = 256 << 20  # smaller files hash in well under a second


def stderr_progress() -> Callable[[int, int], None]:
    """A ``file_digest`` progress callback that shows a large file's hashing on stderr, a line per
    tenth (one rewritten line on a terminal), so stdout stays clean for ``--json``."""
    shown = [-1]

    def report(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if total < PROGRESS_FROM_BYTES or tenth == shown[0]:
            return
        shown[0] = tenth
        terminal = sys.stderr.isatty()
        text = f"hashing the model: {tenth * 10:3d}% of {total / (1 << 30):.1f} GB"
        print(("\r" if terminal else "") + text, end="\n" if tenth == 10 or not terminal else "",
              file=sys.stderr, flush=True)

    return report


def print_json(obj) -> None:
    """One JSON object on stdout, written in one piece: ``json.dump`` writes it in hundreds of
    thousands of small chunks, each a call into the CLI's escaping stream (``TerminalText``)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
