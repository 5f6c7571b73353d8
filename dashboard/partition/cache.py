"""Partition reports on disk, so asking again (or flipping a knob back) answers in milliseconds.

A report is keyed by the model's digest, the options, any device reports, the worker it ran in,
the installed runtime versions and a digest of the code that computes it: a new onnxruntime-qnn
may claim differently, and a changed rule or mapping must never serve an old report. The code
digest covers every module of the packages the analysis runs (``CODE_PACKAGES``), found from the
packages themselves, so a module added or renamed later is covered without a list to update.

Hashing a multi-GB model costs seconds, so the digest of a file is remembered by its size, mtime
and inode (``remembered_digest``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from dashboard.intake.digest import file_digest
from dashboard.partition.report import SCHEMA, PartitionReport
from dashboard.serde import Record, SchemaError, loads

# The packages whose code decides a report: the analysis, the reader and shapes it builds on, and
# the runtime that measures.
CODE_PACKAGES = ("dashboard.partition", "dashboard.intake", "dashboard.runtime")
T = TypeVar("T")
D = TypeVar("D")
DIGEST_INDEX_ENTRIES = 256


def cache_dir() -> Path:
    root = Path(os.environ.get("QNN_LAB_CACHE", Path.home() / ".cache" / "qnn-backend-lab")) / "partitions"
    root.mkdir(parents=True, exist_ok=True)
    return root


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


def cache_key(digest: str, options: Record, device_digests: list[str], worker: str) -> str:
    """The entry of a report of the model ``digest`` under ``options`` (the analysis's options record)."""
    blob = json.dumps({"schema": SCHEMA, "digest": digest, "options": options.to_json(), "devices": device_digests,
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


def remembered_digest(path: str) -> str | None:
    """The digest hashed earlier for this file, if it has not changed since (same size, mtime and
    inode): hashing a multi-GB model costs seconds, and a cached re-run should not."""
    known = read_valid(cache_dir() / "digests.json", DigestIndex, DigestIndex()).files.get(path)
    return known.digest if known is not None and known.stamp == _stamp(path) else None


def known_digest(path: str) -> str:
    """``file_digest(path)``, remembered for ``remembered_digest``."""
    stamp = _stamp(path)
    index_path = cache_dir() / "digests.json"
    index = read_valid(index_path, DigestIndex, DigestIndex())
    digest = file_digest(path)
    index.files[path] = KnownDigest(stamp, digest)
    _write_json(index_path, DigestIndex(dict(list(index.files.items())[-DIGEST_INDEX_ENTRIES:])).to_json())
    return digest


def write(key: str, report: PartitionReport) -> None:
    _write_json(cache_dir() / f"{key}.json", report.to_json())


def read(key: str) -> PartitionReport | None:
    return read_valid(cache_dir() / f"{key}.json", PartitionReport, None)


def read_valid(path: Path, cls: type[T], default: D) -> T | D:
    """The record stored at ``path``, or ``default`` when there is none. An entry that cannot be
    read as ``cls`` (truncated, hand-edited, another version, hostile) is deleted, so the caller
    recomputes it and the next run does not trip over it again."""
    try:
        return loads(cls, path.read_bytes(), str(path))
    except FileNotFoundError:
        return default
    except (OSError, SchemaError):
        path.unlink(missing_ok=True)
        return default


def _write_json(path: Path, data) -> None:
    """Write ``data`` atomically: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)
