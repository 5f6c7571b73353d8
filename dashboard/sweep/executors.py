"""Where a sweep's cells run: ``run_local`` (``--jobs N``, the default), and the factories the
command line calls for ``--ray ADDRESS`` and ``--devices URL,...``.

Each executor is a ``cells.Executor`` (see ``dashboard.sweep.cells`` for the contract): it takes
cells lazily, runs ``run_one(cell, cancel)`` for each, ``jobs`` at a time, and yields every
result as it finishes. The runner above it (``store.run_sweep``) decides which cells run and
records the results; nothing here writes a file.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Iterable, Iterator

from dashboard.runtime.jobs import Cancellation, Cancelled
from dashboard.sweep.cells import Cell, CellProgress, CellResult, Executor, RunOne


def default_jobs() -> int:
    """The machine's cores this process may use (``platform.usable_cores``)."""
    from dashboard.platform import usable_cores

    return usable_cores()


def run_local(cells: Iterable[Cell], run_one: RunOne, *, jobs: int | None = None,
              progress: CellProgress | None = None, cancel: Cancellation | None = None) -> Iterator[CellResult]:
    """Cells on this machine, ``jobs`` at a time. Why threads and not a process pool: a cell's QNN
    work already runs in a runtime worker subprocess of its own (``run_cell`` through
    ``runtime.jobs.run_command``), so each thread only drives one worker, and a worker that
    crashes or is killed is that cell's failed row while the other threads go on. A cell whose
    ``run_one`` raises (a bug in a fake runner, anything but ``Cancelled``) is a failed row too.

    Only ``jobs`` cells are taken from ``cells`` at a time, so memory holds ``jobs`` cells however
    long the sweep. Interrupted (Ctrl-C), closed early by its consumer, or cancelled, it stops
    every running worker (``cancel``) before it returns; cancelled, it raises ``Cancelled`` once
    the running cells have ended (their results are not yielded: they did not finish)."""
    jobs = max(int(jobs or default_jobs()), 1)
    cancel = cancel or Cancellation()
    source = iter(cells)
    running: dict[Future, Cell] = {}
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="sweep-cell")
    try:
        while True:
            while len(running) < jobs and not cancel.cancelled:
                cell = next(source, None)
                if cell is None:
                    break
                running[pool.submit(_one, run_one, cell, cancel)] = cell
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                result = future.result()
                if result is not None:
                    yield result
        cancel.check()
    except BaseException:
        cancel.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _one(run_one: RunOne, cell: Cell, cancel: Cancellation) -> CellResult | None:
    try:
        return run_one(cell, cancel)
    except Cancelled:
        return None
    except Exception as exc:  # noqa: BLE001 - one cell's bug is one failed row
        if cancel.cancelled:
            return None
        return CellResult.failure(cell, f"internal error ({type(exc).__name__}: {exc})")


# -- the other executors: each in its own module, imported only when asked for ---------------------------
def ray_executor(address: str) -> Executor:
    """The executor for ``--ray ADDRESS`` (or ``auto``): cells as Ray tasks on an existing cluster
    (``dashboard.sweep.ray_exec``, the only module that imports Ray)."""
    from dashboard.sweep.ray_exec import ray_executor as connect

    return connect(address)


def devices_executor(urls: list[str]) -> Executor:
    """The executor for ``--devices URL,...``: each device takes the cells of its own SoC
    (``dashboard.sweep.device_exec``)."""
    from dashboard.sweep.device_exec import devices_executor as attach

    return attach(urls)
