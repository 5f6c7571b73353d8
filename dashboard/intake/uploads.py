"""Uploaded models on the server: private, one copy per content, bounded, gone with their sessions.

Layout: ``<root>/<digest>/model.onnx``, where ``root`` is a folder private to the server's user,
created 0700 and refused if it is a symlink, another user's, or readable by others. Which folder:
``QNN_LAB_UPLOAD_DIR`` when set (refused, with the reason, if it fails those checks); else
``~/.cache/qnn-backend-lab/uploads``, in the user's home, where no other user can create anything;
else (no usable home, or a folder there failing the checks) a folder with a random name made by
``tempfile.mkdtemp`` for this process. Why not a fixed name in the shared temp folder
(``<tmp>/qnn-backend-lab-uploads-<uid>``, as before): any user could create it first, and every
upload was then refused until it was removed. Why not ``$XDG_RUNTIME_DIR``: it is usually a
RAM-backed tmpfs of a tenth of the memory, and uploads of gigabytes there would take the server's
memory and fail for room. The digest is ``file_digest``'s, computed while the upload is written, so
the same file uploaded under two names is stored once; each digest has its own folder so an uploaded
model's external-data references can only ever point into its own folder.

Who uses a file: a ``Lease``. A session keeps the lease of the model it shows (``st.session_state``
holds it); every lease of a digest in this process shares one open descriptor with a shared
``flock`` on the file, so other dashboard processes of the same user see it in use too. When the
last lease of a digest is garbage-collected (its session closed, or it moved on to another model)
the file is removed, unless another process still holds it. ``weakref.finalize`` also runs at
interpreter exit and when the web server stops (``platform.on_exit``), so a stopped server leaves
nothing behind; files of a killed one are orphans,
removed least recently used first whenever a new upload needs room under the quota
(``QNN_LAB_UPLOAD_QUOTA``, bytes with an optional K/M/G suffix, default 4G). Files in use are
never removed: an upload that does not fit next to them is refused.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dashboard import platform
from dashboard.errors import UserError
from dashboard.intake.digest import DIGEST_CHUNK, content_hasher

ENV_DIR = "QNN_LAB_UPLOAD_DIR"
ENV_QUOTA = "QNN_LAB_UPLOAD_QUOTA"
DEFAULT_QUOTA = 4 << 30
MODEL_FILE = "model.onnx"
_DIGEST = re.compile(r"^[0-9a-f]{32}$")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_lock = threading.RLock()  # re-entrant: a collection inside ``store`` may finalize another lease
_held: dict[Path, tuple[int, int]] = {}  # upload folder -> (descriptor holding the shared flock, leases)


def upload_root() -> Path:
    """The private upload folder, created if needed (0700, never through a symlink)."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        root = Path(configured)
        problem = _make_private(root)
        if problem:
            raise UserError(f"upload folder {root} {problem}: refusing to store uploads there; remove it or set "
                            f"{ENV_DIR} to a private folder")
        return root
    root = _home_folder()
    if root is not None and _make_private(root) is None:
        return root
    return _random_folder()


def _home_folder() -> Path | None:
    """``~/.cache/qnn-backend-lab/uploads``, or None without a home (a service account)."""
    try:
        return Path.home() / ".cache" / "qnn-backend-lab" / "uploads"
    except (KeyError, RuntimeError):
        return None


_random_root: list[Path] = []  # this process's ``mkdtemp`` folder, once made


def _random_folder() -> Path:
    """A private folder of this process with a name nobody can guess (``tempfile.mkdtemp``: made
    0700 by this call, so nobody can have made it first), kept for the process's later uploads."""
    with _lock:
        if not _random_root or _make_private(_random_root[0]) is not None:
            _random_root[:] = [Path(tempfile.mkdtemp(prefix="qnn-backend-lab-uploads-"))]
        return _random_root[0]


def _make_private(root: Path) -> str | None:
    """Create ``root`` (0700) unless it exists; why it cannot hold uploads, or None when it can."""
    try:
        platform.private_folder(root.parent)  # ~/.cache/qnn-backend-lab: 0700 as well when made here
        os.mkdir(root, 0o700)  # never follows a symlink planted at ``root``: that is "file exists"
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot be created ({exc.strerror or exc})"
    info = os.lstat(root)
    if stat.S_ISLNK(info.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if platform.foreign_owner(info):
        return platform.foreign_owner(info)
    if info.st_mode & 0o077:
        return f"is open to other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def quota() -> int:
    """The upload quota in bytes, from ``QNN_LAB_UPLOAD_QUOTA`` (``500M``, ``4G``, ``1073741824``)."""
    text = os.environ.get(ENV_QUOTA, "").strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return DEFAULT_QUOTA
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)", text)
    if not match:
        raise UserError(f"{ENV_QUOTA}={os.environ[ENV_QUOTA]!r} is not a size (examples: 500M, 4G, 1073741824)")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


@dataclass(eq=False)
class Lease:
    """An uploaded model in use: its path and digest. The file stays while a lease of its digest
    is alive; keep the lease as long as the model is shown."""

    path: Path
    digest: str
    size: int


def store(source: BinaryIO, size: int) -> Lease:
    """Write the upload ``source`` (``size`` bytes, read in chunks: never a second copy in memory)
    into the upload folder and lease it. Raises ``UserError`` when it does not fit the quota."""
    limit = quota()
    if size > limit:
        raise UserError(f"the upload is {_gb(size)}, more than the upload quota of {_gb(limit)} ({ENV_QUOTA}); "
                        "open a model this large by its path on the server")
    root = upload_root()
    handle = tempfile.NamedTemporaryFile(dir=root, prefix=".part-", delete=False)  # 0600
    try:
        digest = content_hasher()  # file_digest's: the same key everywhere
        with handle:
            for chunk in iter(lambda: source.read(DIGEST_CHUNK), b""):
                digest.update(chunk)
                handle.write(chunk)
        key = digest.hexdigest()
        with _lock:
            needed = 0 if (root / key / MODEL_FILE).is_file() else size
            _make_room(root, needed, limit, keep=key)
            return _lease(root, key, Path(handle.name))
    finally:
        Path(handle.name).unlink(missing_ok=True)


def _lease(root: Path, key: str, staging: Path) -> Lease:
    """The lease of ``key``, storing ``staging`` as its file unless a copy is already there."""
    entry = root / key
    entry.mkdir(mode=0o700, exist_ok=True)
    target = entry / MODEL_FILE
    if entry not in _held:
        _held[entry] = (_open_shared(target, staging), 0)
    fd, count = _held[entry]
    _held[entry] = (fd, count + 1)
    os.utime(entry)  # last use, for the least-recently-used order
    lease = Lease(target, key, os.fstat(fd).st_size)
    platform.on_exit(weakref.finalize(lease, _release, entry))  # a web server's stop may skip atexit
    return lease


def _open_shared(target: Path, staging: Path) -> int:
    """A descriptor of ``target`` holding a shared lock, ``staging`` moved there first unless an
    identical copy is there already (a copy another process is removing right now is replaced)."""
    for _ in range(3):
        if not target.is_file():
            os.replace(staging, target)
        try:
            fd = platform.open_no_follow(target)
        except FileNotFoundError:
            continue
        platform.lock_shared(fd)
        try:
            if os.stat(target).st_ino == os.fstat(fd).st_ino:  # still the file at that path
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
    raise OSError(f"{target} kept disappearing while it was stored")


def _release(entry: Path) -> None:
    """One lease of the upload in ``entry`` is gone; after the last one, remove the file unless
    another process uses it."""
    with _lock:
        fd, count = _held[entry]
        if count > 1:
            _held[entry] = (fd, count - 1)
            return
        del _held[entry]
        os.close(fd)
        _remove_if_unused(entry)


def _remove_if_unused(entry: Path) -> bool:
    """Remove an upload's folder when no process holds its file: the exclusive lock is taken
    without waiting and held while the folder goes, so nobody can lease it half removed."""
    try:
        fd = platform.open_no_follow(entry / MODEL_FILE)
    except FileNotFoundError:
        shutil.rmtree(entry, ignore_errors=True)  # a folder left without its file
        return True
    except OSError:
        return False
    try:
        if not platform.try_lock_exclusive(fd):
            return False
        shutil.rmtree(entry, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _make_room(root: Path, size: int, limit: int, keep: str) -> None:
    """Remove unused uploads, least recently used first, until ``size`` more bytes fit under
    ``limit``; refuse the upload when the uploads in use leave no room."""
    if not size:
        return
    entries = [(e.stat().st_mtime, e, _size(e)) for e in root.iterdir() if _DIGEST.match(e.name) and e.name != keep]
    used = sum(s for _, _, s in entries)
    for _, entry, entry_size in sorted(entries, key=lambda item: item[0]):
        if used + size <= limit:
            return
        if entry not in _held and _remove_if_unused(entry):
            used -= entry_size
    if used + size > limit:
        raise UserError(f"no room for a {_gb(size)} upload: uploads in use take {_gb(used)} of the {_gb(limit)} "
                        f"quota ({ENV_QUOTA}); close sessions that show uploaded models, or raise the quota")


def _size(entry: Path) -> int:
    try:
        return (entry / MODEL_FILE).stat().st_size
    except OSError:
        return 0


def _gb(count: int) -> str:
    return f"{count / (1 << 30):.2f} GiB" if count >= 1 << 30 else f"{count / (1 << 20):.0f} MiB"
