"""Model-derived text made safe to show: one rule for the pages and the terminal.

Node, tensor and file names come from whoever wrote the model (or named the file): they may hold
newlines, terminal escape sequences (ESC, BEL, C1 controls), right-to-left overrides or zero-width
characters. Shown raw, they reshape a page, forge lines of CLI output, or make a terminal run its
control sequences (set its title, move the cursor, hide text). Each such character is shown as
its visible escape instead (``\\n``, ``\\x1b``, ``\\u202e``); every printable character, non-ASCII
included, stays as it is.
"""

from __future__ import annotations

import io
from typing import TextIO


def _escaped(value: str, keep: str = "") -> str:
    return "".join(ch if ch.isprintable() or ch in keep else ch.encode("unicode_escape").decode("ascii")
                   for ch in value)


def plain(text: object) -> str:
    """``text`` as one printable line: control and format characters (newlines, bidi overrides,
    zero-width joiners) become visible escapes instead of reshaping what shows them."""
    value = str(text)
    return value if value.isprintable() else _escaped(value)


class TerminalText(io.TextIOBase):
    """A text stream that writes to ``stream`` with every control or format character escaped
    except the newline, carriage return and tab the CLI writes itself, so that a hostile name
    anywhere in a command's output or progress reaches the terminal as text."""

    _KEEP = "\n\r\t"
    _WITHOUT_KEPT = str.maketrans("", "", _KEEP)

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self.line_open = False  # the last text written did not end its line (a Ctrl-C mid-print)

    def write(self, text: str) -> int:
        # Checked in C first: escaping character by character tripled the time of a large --json.
        clean = text.isprintable() or text.translate(self._WITHOUT_KEPT).isprintable()
        if text:
            self.line_open = not text.endswith("\n")
        self._stream.write(text if clean else _escaped(text, self._KEEP))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")
