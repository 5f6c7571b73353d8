"""Reading an untrusted model in a child process with a memory limit first.

Why: the dashboard's server is one process for every session; a model from the browser (a path
or an upload) that needs more memory than the machine has would get it killed, and everyone's
work with it. The child (``python -m dashboard.intake.preflight PATH``) limits its own memory
(``platform.limit_memory``), reads the model with ``load_model`` and exits; only when it succeeded
does the server read the model itself.

Why the child only validates and does not hand the graph back: a ``ModelGraph`` of 20,000 nodes
pickles and unpickles slower than it is read (the reader is a C parse plus one pass), and the
server would still hold the same objects; so the cost of the check is one read of the model in a
fresh interpreter (its start and imports, about a second, plus the read).

=============================  ==========  =====================================================
Environment variable           Default     What it limits
=============================  ==========  =====================================================
``QNN_LAB_READ_MEMORY_MB``     2048        data memory of the child that reads a model from the
                                           browser (POSIX; no limit on Windows)
``QNN_LAB_READ_TIMEOUT_S``     300         seconds that child may take
=============================  ==========  =====================================================

2048 MB admits a graph at every cap of ``dashboard.intake.caps`` (500,000 nodes peak near
0.6 GB) with room to spare, and keeps one read from taking the server's machine down.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dashboard import platform
from dashboard.errors import ModelError, UserError
from dashboard.intake.caps import Cap

READ_MEMORY_MB = Cap("QNN_LAB_READ_MEMORY_MB", 2048, "MB of memory")
READ_TIMEOUT_S = Cap("QNN_LAB_READ_TIMEOUT_S", 300, "seconds")
_REFUSED = 2  # the child's exit code for a ModelError/UserError, whose line it prints on stderr
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)


def check_in_child(path: str | os.PathLike) -> None:
    """Read the model at ``path`` in a memory-limited child; raise its ``ModelError`` line, or one
    saying it needs more memory (or time) than the limit, naming the variable that raises it."""
    memory_mb, timeout = READ_MEMORY_MB.limit(), READ_TIMEOUT_S.limit()
    env = {**os.environ, READ_MEMORY_MB.env: str(memory_mb),
           "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run([sys.executable, "-m", "dashboard.intake.preflight", os.fspath(path)], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                              timeout=timeout)
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise ModelError(f"{path}: takes more than {timeout} s to read; refusing it (limit "
                         f"{READ_TIMEOUT_S.env}={timeout})") from None
    if done.returncode == 0:
        return
    lines = done.stderr.strip().splitlines()
    if done.returncode == _REFUSED and lines and lines[-1].startswith("error: "):
        raise ModelError(lines[-1].removeprefix("error: "))
    raise ModelError(f"{path}: needs more than {memory_mb:,} MB to read; refusing it to protect the server (limit "
                     f"{READ_MEMORY_MB.env}={memory_mb})")


def main(argv: list[str]) -> int:
    """The child: limit memory, read ``argv[0]``; exit 0, or 2 with ``error: LINE`` on stderr."""
    platform.limit_memory(READ_MEMORY_MB.limit() << 20)
    try:
        from dashboard.intake.reader import load_model

        load_model(argv[0])
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
