"""The content hash of a model file: the key of every cache derived from a model.

Kept apart from the reader, and light (no numpy, no onnx): the command line sets up its hashing
progress before anything heavy is imported, so a command's runtime worker starts first.
"""

from __future__ import annotations

import os
from typing import Callable

DIGEST_CHUNK = 1 << 22
Progress = Callable[[int, int], None]
_default_progress: list[Progress] = []


def report_digest_progress(progress: Progress | None) -> None:
    """Where ``file_digest`` reports when its caller passes no callback: the command line points
    this at stderr once, so every command that hashes a large model (on any thread, deep inside
    partition or timeline) shows it is alive without each call site passing a callback."""
    _default_progress[:] = [progress] if progress else []


def content_hasher():
    """The hash behind ``file_digest``, for code that sees the bytes go by (an upload being
    written) and must arrive at the same digest."""
    import hashlib  # here: the classify command never hashes, and hashlib costs a few ms to import

    return hashlib.blake2b(digest_size=16)


def file_digest(path: str | os.PathLike, progress: Progress | None = None) -> str:
    """Content hash used as the cache key for everything derived from a model. ``progress(done,
    total)`` is called after every chunk (4 MB): hashing a multi-GB model takes seconds."""
    progress = progress or next(iter(_default_progress), None)
    digest = content_hasher()
    with open(path, "rb") as handle:
        total, done = os.fstat(handle.fileno()).st_size, 0
        for chunk in iter(lambda: handle.read(DIGEST_CHUNK), b""):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()
