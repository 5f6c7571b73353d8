"""Partition reports on disk, so asking again (or flipping a knob back) answers in milliseconds.

A report is keyed by the model's digest, the options, any device reports, the worker it ran in,
the installed runtime versions and a digest of the code that computes it: a new onnxruntime-qnn
may claim differently, and a changed rule or mapping must never serve an old report. The code
digest covers every module of the packages the analysis runs (``CODE_PACKAGES``), found from the
packages themselves, so a module added or renamed later is covered without a list to update.

Hashing a multi-GB model costs seconds, so the digest of a file is remembered by its size, mtime
and inode (``remembered_digest``).

The cache is best-effort: it only saves time, so it never costs a result. A write that fails (a
full disk, a read-only or unwritable folder) is skipped with one warning per folder and reason,
and its temporary file is removed; an entry that is not a regular file (a directory, a FIFO, a
symlink) is never opened for reading, and is removed where that is safe; a digest read back
from ``digests.json`` that is not one this module writes is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from dashboard import platform
from dashboard.intake.digest import file_digest
from dashboard.partition.report import SCHEMA, PartitionReport
from dashboard.runtime.knobs import Settings
from dashboard.serde import Record, SchemaError, loads

# The packages whose code decides a report: the analysis, the reader and shapes it builds on, and
# the runtime that measures.
CODE_PACKAGES = ("dashboard.partition", "dashboard.intake", "dashboard.runtime")
T = TypeVar("T")
D = TypeVar("D")
DIGEST_INDEX_ENTRIES = 256
DIGEST_RE = re.compile(r"[0-9a-f]{32}")  # ``file_digest``: blake2b of 16 bytes, in lowercase hex
LOG = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def cache_dir() -> Path:
    """The partition cache's folder (``QNN_LAB_CACHE``), created if it can be (0700, as its
    missing parents: ``platform.private_folder``; entries are 0600, ``mkstemp``'s); one that cannot
    be created is warned about and returned anyway (reads then find nothing, writes are skipped)."""
    root = Path(os.environ.get("QNN_LAB_CACHE", Path.home() / ".cache" / "qnn-backend-lab")) / "partitions"
    try:
        platform.private_folder(root)  # 0700: models' digests and reports are this user's
    except OSError as exc:
        warn_unwritable(root, exc)
    return root


def warn_unwritable(where: Path, exc: OSError) -> None:
    """Say once per folder and reason that the cache is not written there: the run goes on."""
    reason = exc.strerror or str(exc)
    with _warned_lock:
        if (str(where), reason) in _warned:
            return
        _warned.add((str(where), reason))
    LOG.warning("warning: the cache in %s is not written (%s); results are still returned, uncached", where, reason)


@lru_cache(maxsize=1)
def runtime_stamp() -> str:
    """Installed runtime versions: a new onnxruntime-qnn may claim differently, so it keys the cache."""
    from importlib import metadata

    parts = []
    for dist in ("onnxruntime", "onnxruntime-qnn"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=none")
    return ",".join(parts)


@lru_cache(maxsize=1)
def code_stamp() -> str:
    """A digest of the source of every module in ``CODE_PACKAGES``."""
    digest = hashlib.blake2b(digest_size=8)
    for package in CODE_PACKAGES:
        spec = importlib.util.find_spec(package)
        for folder in spec.submodule_search_locations or ():
            for path in sorted(Path(folder).glob("*.py")):
                digest.update(f"{package}.{path.stem}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def warm_stamps() -> None:
    """Compute what every key of this process shares (the installed versions, the code's digest:
    tens of milliseconds of metadata and file reads) ahead of time, on a thread while a worker
    measures, so the key of a fresh report costs nothing once it arrives."""
    runtime_stamp()
    code_stamp()


def cache_key(digest: str, options: Settings, device_digests: list[str], worker: str) -> str:
    """The entry of a report of the model ``digest`` under ``options``: the settings that decide
    the result (``Settings.result_json``: not the timeout, which only decides whether it comes)."""
    blob = json.dumps({"schema": SCHEMA, "digest": digest, "options": options.result_json(), "devices": device_digests,
                       "runtime": runtime_stamp(), "code": code_stamp(), "worker": worker}, sort_keys=True)
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


def _stamp(path: str) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


@dataclass
class KnownDigest(Record):
    stamp: tuple[int, int, int]  # size, mtime_ns, inode
    digest: str


@dataclass
class DigestIndex(Record):
    files: dict[str, KnownDigest] = field(default_factory=dict)


def _digest_index() -> DigestIndex:
    """``digests.json`` without the entries whose digest is not one ``file_digest`` makes. Why:
    a digest names cache entries and the model store's folders (locally and on a device), so a
    hand-edited or planted one must not be taken as a model's."""
    index = read_valid(cache_dir() / "digests.json", DigestIndex, DigestIndex())
    index.files = {path: known for path, known in index.files.items()
                   if isinstance(known.digest, str) and DIGEST_RE.fullmatch(known.digest)}
    return index


def remembered_digest(path: str) -> str | None:
    """The digest hashed earlier for this file, if it has not changed since (same size, mtime and
    inode): hashing a multi-GB model costs seconds, and a cached re-run should not."""
    known = _digest_index().files.get(path)
    return known.digest if known is not None and known.stamp == _stamp(path) else None


def known_digest(path: str) -> str:
    """``file_digest(path)``, remembered for ``remembered_digest`` (when the cache can be written:
    an ``OSError`` raised here is about reading the model, never about the cache)."""
    stamp = _stamp(path)
    index = _digest_index()
    digest = file_digest(path)
    index.files[path] = KnownDigest(stamp, digest)
    write_json(cache_dir() / "digests.json",
               DigestIndex(dict(list(index.files.items())[-DIGEST_INDEX_ENTRIES:])).to_json())
    return digest


def write(key: str, report: PartitionReport) -> bool:
    """Cache ``report`` under ``key``; False (after a warning) when the cache cannot take it."""
    return write_json(cache_dir() / f"{key}.json", report.to_json())


def read(key: str) -> PartitionReport | None:
    return read_valid(cache_dir() / f"{key}.json", PartitionReport, None)


def read_valid(path: Path, cls: type[T], default: D) -> T | D:
    """The record stored at ``path``, or ``default`` when there is none. An entry that cannot be
    read as ``cls`` (truncated, hand-edited, another version, hostile, not a regular file) is
    removed where it can be, so the caller recomputes it and the next run does not trip over it
    again; it is never opened in a way that could block (a FIFO) or follow a symlink."""
    try:
        with os.fdopen(platform.open_regular(path), "rb") as handle:
            return loads(cls, handle.read(), str(path))
    except FileNotFoundError:
        return default
    except (OSError, SchemaError):
        _discard(path)
        return default


def _discard(path: Path) -> None:
    """Remove a bad entry: a file, a FIFO or a symlink (never what it points to); an empty
    directory. Anything else (a directory with contents) is left alone and skipped."""
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(path.lstat().st_mode):
            path.rmdir()
        else:
            path.unlink()


def write_json(path: Path, data) -> bool:
    """Write ``data`` atomically (a reader never sees half a file) if the cache can take it:
    on any ``OSError`` (a full disk, a read-only or unwritable folder, a directory in the way)
    the temporary file is removed, one warning is logged, and False is returned."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data))  # the C encoder: json.dump streams through the Python one
        os.replace(tmp, path)
        return True
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        warn_unwritable(path.parent, exc)
        return False
