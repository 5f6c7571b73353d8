"""What several commands share: the parser that fails in one line, the settings' flags
(``SettingsArgs``, generated from ``runtime.knobs``), and JSON output."""

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


class SettingsArgs:
    """The settings' flags and their parsing, in the manner of Polygraphy's argument groups: the
    group adds one flag per knob of ``runtime.knobs`` (its flag, help, choices and default come
    from the table) and turns the parsed ``args`` into a ``Settings`` (or a record built on it,
    e.g. ``TimelineOptions``), so every command that takes settings (partition, timeline,
    report, ...) spells, parses and checks them the same way. ``keys``: the knobs the command
    takes (all by default); ``analysis``: whose timeout is the default (``knobs.TIMEOUTS``; none:
    each analysis its own)."""

    def __init__(self, keys: tuple[str, ...] | None = None, analysis: str | None = None) -> None:
        from dashboard.runtime.knobs import KNOBS, defaults

        self.knobs = [k for k in KNOBS if keys is None or k.key in keys]
        self.defaults = defaults(analysis)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        for knob in self.knobs:
            parser.add_argument(knob.flag, **self._argument(knob))

    def _argument(self, knob) -> dict:
        default = self.defaults[knob.key]
        if knob.kind == "flag":
            return {"action": "store_true", "help": knob.help}
        if knob.kind in ("dims", "shapes", "options"):
            return {"action": "append", "default": [], "metavar": knob.metavar, "help": f"{knob.help} (repeatable)"}
        if knob.kind == "backends":
            return {"default": ",".join(default), "metavar": "LIST",
                    "help": f"{knob.help}: comma list of {', '.join(knob.choices)} (default {','.join(default)})"}
        if knob.kind == "choice":
            return {"choices": knob.choices, "default": default, "help": knob.help}
        if knob.kind == "soc":
            return {"metavar": knob.metavar, "default": default, "help": f"{knob.help}; known: {', '.join(knob.choices)}"}
        if knob.kind == "seconds":
            return {"type": seconds, "default": default, "metavar": knob.metavar,
                    "help": knob.help + (f" (default {default:g})" if default else "")}
        raise AssertionError(f"no flag for knobs of kind {knob.kind!r}")

    def parse(self, args: argparse.Namespace, record: type | None = None, **fields):
        """``record`` (``Settings`` by default) from ``args`` and the command's other ``fields``;
        a bad value is one ``UserError`` line, its hints in the CLI's words. Provider options are
        checked as the terminal's (``access.TERMINAL``): options that load a library or write a
        file are kept, with their paths checked on this machine, or, for a remote ``--device``, a
        note on stderr that they are the device's paths and were not checked."""
        from dashboard.errors import UserError
        from dashboard.runtime.knobs import CLI, Settings, worded_error

        values = {knob.key: self._value(knob, args) for knob in self.knobs}
        try:
            return (record or Settings)(**values, **fields)
        except UserError as exc:
            raise worded_error(exc, CLI) from None

    def _value(self, knob, args: argparse.Namespace):
        from dashboard.intake.shapes import parse_shapes
        from dashboard.runtime.knobs import parse_assignments

        given = getattr(args, knob.flag[2:].replace("-", "_"))
        if knob.kind == "backends":
            return tuple(given.split(","))
        if knob.kind == "dims":
            return parse_assignments(given, knob.flag, integer=True)
        if knob.kind == "shapes":
            return parse_shapes(given, knob.flag)
        if knob.kind == "options":
            return _terminal_provider_options(parse_assignments(given, knob.flag), args)
        return given


def _terminal_provider_options(options: dict[str, str], args: argparse.Namespace) -> dict[str, str]:
    from dashboard.access import TERMINAL
    from dashboard.runtime import qnn_options
    from dashboard.runtime.devices import Device

    device = Device.parse(getattr(args, "device", None) or "local", source=TERMINAL)
    for note in qnn_options.check(options, origin=TERMINAL, remote=None if device.is_local else device.label):
        print(f"note: {note}", file=sys.stderr, flush=True)
    return options


def seconds(text: str) -> float:
    """An argparse type for ``--timeout``: a positive, finite number of seconds, at most a week
    (``knobs.check_timeout``)."""
    from dashboard.errors import UserError
    from dashboard.runtime.knobs import MAX_SECONDS, check_timeout

    try:
        return check_timeout(float(text))
    except (ValueError, UserError):
        raise argparse.ArgumentTypeError(f"must be a number of seconds between 0 and {MAX_SECONDS:,} (a week), "
                                         f"got {text!r}") from None


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
        text = f"hashing the model: {tenth * 10:3d}% of {total / (1 << 30):.1f} GiB"
        print(("\r" if terminal else "") + text, end="\n" if tenth == 10 or not terminal else "",
              file=sys.stderr, flush=True)

    return report


def print_json(obj) -> None:
    """One JSON object on stdout, written in one piece: ``json.dump`` writes it in hundreds of
    thousands of small chunks, each a call into the CLI's escaping stream (``TerminalText``)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
