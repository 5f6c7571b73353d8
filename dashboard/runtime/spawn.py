"""Starting a worker process, and the spare a command line starts before anything else.

Split from ``client`` so that starting this machine's worker costs nothing but ``subprocess``: a
command that will surely need the worker (``python -m dashboard partition``) starts it first thing
(``start_spare``, called by ``dashboard.__main__`` before the CLI is imported), and the worker's
interpreter, imports and the session it compiles then run beside everything the command imports
and reads, instead of after the protocol's records (about 40 ms of a first ``partition`` went to
importing the client and the CLI before the worker could start). The next local ``WorkerClient``
adopts the spare (``take_spare``); one nobody adopts (the answer came from a cache, bad arguments)
is stopped when the process exits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, NamedTuple

# The folder that holds the ``dashboard`` package: the checkout, or ``site-packages`` once the wheel
# is installed. A local worker finds the package through it (``PYTHONPATH``: another interpreter,
# ``local?python=PATH``, has not installed it).
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def local_worker_argv() -> list[str]:
    """This machine's worker: the same interpreter, the package this process imported."""
    return [sys.executable, "-m", "dashboard.runtime.worker"]


def local_env() -> dict[str, str]:
    """A worker's environment: this process's, with the package importable, and numpy's OpenBLAS
    on one thread unless the user chose otherwise. Why: OpenBLAS starts a thread per core when
    numpy is imported, and they spin, waiting for work, for about a tenth of a second (measured:
    0.1 s of a worker's 0.48 s of CPU in a first ``partition``, none of it work), which a loaded
    machine takes from every other process. A worker's numpy does elementwise work and small
    reductions; no matrix product of its is large enough to gain from more threads."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def worker_cwd() -> Path:
    """A local worker's working directory: ``<QNN_LAB_CACHE>/worker`` (``~/.cache/qnn-backend-lab``
    by default), this user's own folder. Why a folder of its own: ``python -m`` puts the working
    directory first on ``sys.path``, so a shared one (``/tmp``) could shadow the package or numpy,
    and the EP writes the dumps a terminal asked for without a folder (``dump_json_qnn_graph=1``)
    there, which must land neither in ``site-packages`` nor in the checkout. The worker itself
    uses absolute paths and makes its scratch folders under the temp folder
    (``dashboard.runtime.scratch``). If that folder cannot be made, the package's parent."""
    from dashboard import platform

    try:
        folder = Path(os.environ.get("QNN_LAB_CACHE") or Path.home() / ".cache" / "qnn-backend-lab") / "worker"
        platform.private_folder(folder)  # 0700: the dumps the EP writes there are of the user's models
    except (OSError, RuntimeError):  # RuntimeError: no home folder can be found
        return PACKAGE_PARENT
    return folder


def start(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """The worker process of ``argv`` (a local Python, or the ssh command of a device), its
    protocol on pipes, in a process group of its own (a Ctrl-C in the terminal reaches only this
    process, which then stops the worker itself). ``OSError`` when it cannot be started."""
    from dashboard import platform

    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=str(worker_cwd()), **platform.detached_group())


def stop(proc: subprocess.Popen, grace: float, local: bool = False) -> None:
    """Close the worker's stdin, give it ``grace`` seconds to exit, then kill its process group;
    a ``local`` worker's scratch folders are then removed (killed, it may not have removed them).

    The stdin is closed on a thread of its own: while another thread is still writing a request
    (a model chunk) to a worker that does not read (stopped, or busy in native code), the pipe's
    lock is held until that write fails, which is only once the worker is killed."""
    from dashboard import platform
    from dashboard.runtime import scratch

    try:
        threading.Thread(target=_close_quietly, args=(proc.stdin,), daemon=True).start()
    except RuntimeError:  # at interpreter exit (``atexit``, finalizers) no thread starts: close it here
        _close_quietly(proc.stdin)
    if grace > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    platform.kill_group(proc)
    if local:
        scratch.remove_of(proc.pid)


def _close_quietly(stream: IO[bytes] | None) -> None:
    with contextlib.suppress(OSError, ValueError):
        if stream is not None:
            stream.close()


class Spare(NamedTuple):
    proc: subprocess.Popen
    argv: list[str]
    env: dict[str, str]


_spare: Spare | None = None
_lock = threading.Lock()  # one adopter per spare, whichever threads start clients at once
_at_exit = False  # stop_spare is registered with atexit (once)


def start_spare() -> None:
    """Start this machine's worker now, for the next local ``WorkerClient`` to adopt; stopped at
    exit if nobody does. A worker that cannot start is left for that client to report."""
    global _spare, _at_exit
    with _lock:
        if _spare is not None:
            return
        argv, env = local_worker_argv(), local_env()
        try:
            _spare = Spare(start(argv, env), argv, env)
        except OSError:
            return
        if not _at_exit:
            import atexit

            atexit.register(stop_spare)
            _at_exit = True


def take_spare(argv: list[str]) -> Spare | None:
    """The spare, for a client of ``argv`` started under this environment, if it still runs. Any
    other spare is stopped: one started under another environment (a caller changed
    ``QNN_LAB_CACHE`` since: a test, a notebook) would read and write another cache."""
    global _spare
    with _lock:
        spare, _spare = _spare, None
    if spare is None:
        return None
    if spare.argv != argv or spare.env != local_env() or spare.proc.poll() is not None:
        _stop_spare_process(spare)
        return None
    return spare


def stop_spare() -> None:
    """Stop a spare nobody adopted (at exit), and remove what it left."""
    global _spare
    with _lock:
        spare, _spare = _spare, None
    if spare is not None:
        _stop_spare_process(spare)


def _stop_spare_process(spare: Spare) -> None:
    stop(spare.proc, 0, local=True)
    for stream in (spare.proc.stdout, spare.proc.stderr):  # nobody was reading them: no pump was started
        _close_quietly(stream)
