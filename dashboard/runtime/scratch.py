"""Scratch folders of the worker process, removed when their job ends, also when it ends early.

Why a registry: a worker whose client died exits at once, even in the middle of a compile
(``dashboard.runtime.worker``'s stdin watchdog calls ``os._exit`` from another thread, so no
``finally`` block of the running request runs). Every scratch folder a request creates is
registered here, and the watchdog removes them all before it exits: no folder outlives its job.
A worker killed outright (SIGKILL, a native crash) removes nothing, so every folder carries its
worker's pid in its name: the client that killed it, or found it dead, removes them at once (``remove_of``), and
``sweep`` removes those of workers that are gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Iterator

from dashboard import platform

_LOCK = threading.Lock()
_LIVE: set[Path] = set()


def make(prefix: str, parent: str | Path | None = None) -> Path:
    """A new empty folder ``<prefix><pid>-<random>`` (``tempfile.mkdtemp``), registered until
    ``remove`` or ``keep``."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    with _LOCK:
        _LIVE.add(path)
    return path


def remove(path: str | Path) -> None:
    """Delete a folder from ``make`` and forget it."""
    path = Path(path)
    with _LOCK:
        _LIVE.discard(path)
    shutil.rmtree(path, ignore_errors=True)


def keep(path: str | Path) -> None:
    """Forget a folder from ``make`` without deleting it (it became a result, e.g. renamed into
    a cache)."""
    with _LOCK:
        _LIVE.discard(Path(path))


@contextlib.contextmanager
def folder(prefix: str, parent: str | Path | None = None) -> Iterator[Path]:
    """A registered scratch folder for the duration of the block."""
    path = make(prefix, parent)
    try:
        yield path
    finally:
        remove(path)


def remove_all() -> None:
    """Delete every registered folder (the worker's last act before an early exit)."""
    with _LOCK:
        paths = list(_LIVE)
        _LIVE.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def sweep(prefix: str, parent: str | Path | None = None) -> list[Path]:
    """Remove the folders ``make(prefix)`` left behind by workers that no longer run (where the
    platform can tell); return them."""
    removed = []
    for path in Path(parent or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and platform.pid_alive(int(pid)) is False:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_of(pid: int, parent: str | Path | None = None) -> list[Path]:
    """Remove the folders ``make`` made in the worker ``pid`` (``<prefix><pid>-<random>`` with a
    project prefix); return them. The client calls this once it has killed that worker: a
    worker killed before its watchdog finished ``remove_all`` (a loaded machine, where the stop's
    grace runs out) then leaves nothing behind, without waiting for the next run's ``sweep``."""
    name = re.compile(rf"(?:qbl|qnn-lab)-(?:[a-z]+-)*{int(pid)}-[a-z0-9_]+")
    removed = []
    for path in Path(parent or tempfile.gettempdir()).glob(f"*-{int(pid)}-*"):
        if name.fullmatch(path.name) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
