"""User-facing errors.

A ``UserError`` carries a one-line message that the CLI prints as ``error: ...`` (exit code 2) and
the UI shows with ``st.error``. Anything else that escapes is a bug, not bad input.
"""


class UserError(Exception):
    """Bad input or an unusable environment, explained in one line."""


class ModelError(UserError):
    """The model file cannot be read, or its graph is not a valid ONNX graph."""


def one_line(exc: BaseException) -> str:
    """The line of an exception a user can act on: ONNX Runtime and QNN put the message last,
    after source locations; an exception without text is named by its type."""
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
