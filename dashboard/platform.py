"""Everything that differs between POSIX and Windows, in one small module.

Why one module: the worker and its client run on Windows on Snapdragon as well as on Linux (and
the dashboard on any of them), and the calls that break there are few but scattered by nature (``os.pread``, ``os.killpg``,
``signal.SIGKILL``, an ``os.symlink`` that needs admin rights, exit codes that are NTSTATUS values
rather than signals). Keeping them here, each with its Windows branch, makes the rest of the
package portable by construction; ``tests/test_platform.py`` fails when a POSIX-only (or
Windows-only) call appears anywhere else in ``dashboard/``.

The pure functions (``describe_exit``) take the platform as an argument so both branches are
tested on any host.
"""

from __future__ import annotations

import atexit
import errno
import os
import signal
import subprocess
import threading

WINDOWS = os.name == "nt"

# Exit codes of a Windows process killed by an unhandled exception (NTSTATUS, ntstatus.h), named
# as a crash report should name them.
NTSTATUS = {
    0x80000003: "BREAKPOINT",
    0xC0000005: "ACCESS_VIOLATION",
    0xC0000006: "IN_PAGE_ERROR",
    0xC0000008: "INVALID_HANDLE",
    0xC0000017: "NO_MEMORY",
    0xC000001D: "ILLEGAL_INSTRUCTION",
    0xC0000025: "NONCONTINUABLE_EXCEPTION",
    0xC0000094: "INTEGER_DIVIDE_BY_ZERO",
    0xC0000096: "PRIVILEGED_INSTRUCTION",
    0xC00000FD: "STACK_OVERFLOW",
    0xC0000135: "DLL_NOT_FOUND",
    0xC0000139: "ENTRYPOINT_NOT_FOUND",
    0xC000013A: "CONTROL_C_EXIT",
    0xC0000142: "DLL_INIT_FAILED",
    0xC0000374: "HEAP_CORRUPTION",
    0xC0000409: "STACK_BUFFER_OVERRUN",
    0xC0000420: "ASSERTION_FAILURE",
    0xC0000602: "FAIL_FAST_EXCEPTION",
}


# -- processes ------------------------------------------------------------------------------------
def detached_group() -> dict:
    """``Popen`` arguments that start a child in a process group of its own, so a Ctrl-C in the
    terminal reaches only the caller, which then stops the child itself (``kill_group``)."""
    if WINDOWS:
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def pid_alive(pid: int) -> bool | None:
    """Whether process ``pid`` exists; None where that cannot be asked without touching it
    (Windows: ``os.kill`` there terminates)."""
    if WINDOWS:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and everything in its process group (POSIX) or process tree (Windows), then
    reap it. Only a child that has not been reaped is signalled: its id cannot have been reused."""
    if proc.poll() is None:
        if WINDOWS:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True, check=False)
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if proc.poll() is None:
            proc.kill()
    proc.wait()


def describe_exit(code: int | None, windows: bool = WINDOWS) -> str:
    """How a process ended, as a crash report says it: ``killed by SIGSEGV`` (POSIX: a negative
    return code is the signal), ``crashed with 0xC0000005 ACCESS_VIOLATION`` (Windows: an
    unhandled exception's NTSTATUS, which ``subprocess`` reports as a large positive number), or
    ``exited with code N``."""
    if code is None:
        return "exit status unknown"
    if code < 0 and not windows:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    status = code & 0xFFFFFFFF
    if windows and status >= 0x80000000:
        name = NTSTATUS.get(status)
        return f"crashed with 0x{status:08X}" + (f" {name}" if name else " (an NTSTATUS exception code)")
    return f"exited with code {code}"


def die(signal_name: str) -> None:
    """End this process the way a native crash does (the worker's ``crash`` command, for tests of
    the crash path): the named signal on POSIX, an access violation on Windows."""
    if WINDOWS:
        import ctypes

        ctypes.string_at(0)  # reads address 0: 0xC0000005 ACCESS_VIOLATION
    os.kill(os.getpid(), getattr(signal, signal_name))


class Terminated(BaseException):
    """The process was asked to stop (SIGTERM, SIGHUP, Ctrl-Break): raised in the main thread so
    ``finally`` blocks and context managers stop the workers on the way out. A ``BaseException``
    like ``KeyboardInterrupt``, so ``except Exception`` handlers do not swallow it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def raise_on_termination() -> None:
    """Turn the termination signals this platform delivers into ``Terminated`` in the main thread
    (Ctrl-C stays ``KeyboardInterrupt``)."""
    names = ("SIGBREAK", "SIGTERM") if WINDOWS else ("SIGTERM", "SIGHUP")

    def handler(signum: int, frame) -> None:
        raise Terminated(signal.Signals(signum).name)

    for name in names:
        signum = getattr(signal, name, None)
        if signum is not None:
            signal.signal(signum, handler)


TERMINATION_EXIT = {"SIGTERM": 143, "SIGHUP": 129, "SIGBREAK": 149}  # 128 + signal number, as shells report


# -- the end of a server ------------------------------------------------------------------------------
_exit_hooks: list = []
_exit_lock = threading.Lock()


def on_exit(hook) -> None:
    """Run ``hook`` once, at interpreter exit or when the web server stops, whichever comes first.
    Why both: the dashboard's web server (uvicorn, under ``st.App``) shuts down gracefully on
    SIGTERM but then re-raises the signal with its default action, which ends the process without
    running ``atexit`` handlers (``weakref.finalize`` included). So the cleanup a server owes
    (stop its workers, remove its uploads) is registered here, and the server's shutdown runs it
    (``run_exit_hooks``). A hook may be a ``weakref.finalize``: a dead one is dropped."""
    with _exit_lock:
        _exit_hooks[:] = [h for h in _exit_hooks if getattr(h, "alive", True)]
        _exit_hooks.append(hook)


def run_exit_hooks() -> None:
    """Run every registered hook, newest first; one that fails does not stop the others."""
    while True:
        with _exit_lock:
            if not _exit_hooks:
                return
            hook = _exit_hooks.pop()
        try:
            hook()
        except Exception:  # noqa: BLE001 - the rest of the cleanup must still run
            pass


atexit.register(run_exit_hooks)


def relay_hangup_as_termination() -> None:
    """Treat SIGHUP (the terminal that started the server closed) like SIGTERM: whatever handles
    SIGTERM when the signal comes (uvicorn's graceful shutdown) handles it too. POSIX only;
    Windows has no SIGHUP."""
    if WINDOWS:
        return

    def handler(signum: int, frame) -> None:
        current = signal.getsignal(signal.SIGTERM)
        if callable(current):
            current(signal.SIGTERM, frame)
        else:
            raise Terminated("SIGHUP")

    signal.signal(signal.SIGHUP, handler)


# -- files ------------------------------------------------------------------------------------------
def open_twice() -> tuple[int, int]:
    """A new temporary file opened twice: (write fd, read fd), each with its own offset, removed
    when both are closed.

    Why: native log capture points fd 2 at the writer while native threads keep writing to it; the
    reader must read what was written without moving the writer's offset. ``os.pread`` does that
    on POSIX only. Linux makes the file without a name (``O_TMPFILE``: a process that ends at any
    instant, ``os._exit`` from a watchdog or SIGKILL between two calls here, leaves nothing behind)
    and opens it again through ``/proc``; other POSIX systems unlink it at once (the open
    descriptors keep it); Windows opens both with ``O_TEMPORARY`` (delete on last close, shared
    delete access, so the second open is allowed)."""
    import tempfile  # here: every process imports this module, few capture native logs
    import uuid

    unnamed = _open_unnamed_twice()
    if unnamed is not None:
        return unnamed
    flags = getattr(os, "O_BINARY", 0) | getattr(os, "O_NOINHERIT", 0) | getattr(os, "O_TEMPORARY", 0)
    path = os.path.join(tempfile.gettempdir(), f"qnn-lab-log-{uuid.uuid4().hex}")
    writer = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o600)
    try:
        reader = os.open(path, os.O_RDONLY | flags)
    except OSError:
        os.close(writer)
        raise
    if not WINDOWS:
        os.unlink(path)
    return writer, reader


def _open_unnamed_twice() -> tuple[int, int] | None:
    """``open_twice`` with a file that never has a name (Linux), or None where that cannot be."""
    import tempfile

    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    try:
        writer = os.open(tempfile.gettempdir(), os.O_RDWR | flag | os.O_CLOEXEC, 0o600)
    except OSError:  # a file system without O_TMPFILE support
        return None
    try:
        reader = os.open(f"/proc/self/fd/{writer}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no /proc
        os.close(writer)
        return None
    return writer, reader


def read_at(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes at ``offset`` of a descriptor nobody else reads (``open_twice``'s reader)."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def discard_into(path: str) -> bool:
    """Make writes to the new file ``path`` vanish, if the platform can: on POSIX a symlink to
    ``/dev/null`` (ONNX Runtime then writes an optimized model's weights nowhere). Windows needs
    admin rights or developer mode for symlinks, so there the file is simply written (into a
    scratch folder that is removed). True if writes are discarded."""
    if WINDOWS or not os.path.exists(os.devnull):
        return False
    try:
        os.symlink(os.devnull, path)
    except OSError:
        return False
    return True



# -- the host -----------------------------------------------------------------------------------------
_WINDOWS_CPU_KEY = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"


def processor_name() -> str:
    """The processor's marketing name where the OS keeps one: Windows' registry
    (``Snapdragon(R) X Elite - X1E78100 - Qualcomm(R) Oryon(TM) CPU``), else ``platform.processor()``.
    The device doctor identifies a Windows on Snapdragon part by it."""
    import platform as host

    if not WINDOWS:
        return host.processor()
    import winreg

    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, _WINDOWS_CPU_KEY) as key:
            return str(winreg.QueryValueEx(key, "ProcessorNameString")[0])
    except OSError:
        return host.processor()


# -- files of one user -------------------------------------------------------------------------------
def user_tag() -> str:
    """Who runs this process, for a per-user folder name: the uid (POSIX), the login (Windows)."""
    if WINDOWS:
        import getpass

        return getpass.getuser()
    return str(os.getuid())


def foreign_owner(info: os.stat_result) -> str | None:
    """Why a folder with ``info`` is not this user's own (None when it is, or where ownership is
    not a uid: Windows folders under the user's temp folder are private to them already)."""
    if WINDOWS or info.st_uid == os.getuid():
        return None
    return f"belongs to uid {info.st_uid}"


def writable_by_others(info: os.stat_result) -> str | None:
    """Why a file with ``info`` may be changed by other users (None when it may not, or on
    Windows, where a user's profile folder is private to them already)."""
    if WINDOWS or not info.st_mode & 0o022:
        return None
    return f"is writable by others (mode {info.st_mode & 0o777:o})"


def open_no_follow(path: str | os.PathLike) -> int:
    """A read-only descriptor of ``path`` that is never a symlink's target."""
    if WINDOWS:
        if os.path.islink(path):
            raise OSError(f"{path} is a symlink")
        return os.open(path, os.O_RDONLY | os.O_BINARY)
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)


def lock_shared(fd: int) -> None:
    """Hold a shared lock on ``fd`` until it is closed (other readers may hold one too)."""
    if not WINDOWS:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH)


def try_lock_exclusive(fd: int) -> bool:
    """Take the exclusive lock on ``fd`` without waiting; False when another holder has one.
    (Windows keeps the file in use by its open handles instead, so removal fails there.)"""
    if WINDOWS:
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity on Linux (a container or ``taskset``
    gives it fewer than the machine has), the machine's count elsewhere."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return max(os.cpu_count() or 1, 1)


def children_cpu_seconds() -> float | None:
    """User + system CPU seconds of this process's finished children (None on Windows)."""
    if WINDOWS:
        return None
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- cache entries and private folders (issue 14) -----------------------------------------------------
def open_regular(path: str | os.PathLike) -> int:
    """A read-only descriptor of the regular file at ``path``; ``OSError`` for anything else.

    Why: a cache entry replaced by a FIFO would block a plain ``open`` until a writer comes (a
    hang), a directory raises late, and a symlink could point anywhere. POSIX opens without
    following a symlink and without blocking (``O_NONBLOCK`` only matters for FIFOs and devices;
    reads of a regular file ignore it), then checks the kind on the open descriptor itself, so
    nothing can be swapped in between. Windows has no FIFOs at a path: a symlink is refused
    first."""
    if WINDOWS:
        if os.path.islink(path):
            raise OSError(f"{path} is a symlink")
        fd = os.open(path, os.O_RDONLY | os.O_BINARY)
    else:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    import stat

    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def private_folder(path: str | os.PathLike) -> str:
    """``path`` as a folder, each folder this call makes (``path`` and its missing parents) mode
    0700: only this user may list or enter it. Why: the caches hold models, their digests and what
    was measured on them, and a sweep's records name every model; another user of the machine has
    no business reading them, and a folder made readable by the default umask (0755) lets them.
    A folder that exists is left as it is (the user's own choice, or made by an older version:
    ``chmod 700`` tightens it). ``NotADirectoryError`` when something else than a folder is there.
    (On Windows the mode is ignored: a user's profile folder is private already.)"""
    path = os.fspath(path)
    missing = []
    here = os.path.abspath(path)
    while not os.path.isdir(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise NotADirectoryError(errno.ENOTDIR, "something else than a folder is there", folder) from None
    return path


def create_private(path: str | os.PathLike) -> int:
    """A write descriptor of a new file at ``path`` that only this user may read (0600), never
    a symlink planted there (``O_EXCL`` refuses anything already at the path)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """``data`` into a new private file at ``path`` (``create_private``)."""
    with os.fdopen(create_private(path), "wb") as out:
        out.write(data)


# -- a child's memory ---------------------------------------------------------------------------------
def limit_memory(max_bytes: int) -> bool:
    """Cap this process's data memory (heap and private anonymous mappings) at ``max_bytes``, so an
    allocation past it fails (``MemoryError``, or the process dies) instead of the machine running
    out and the kernel killing whatever is largest, often the dashboard's server. For a child that
    reads one untrusted model and exits; call it first thing.

    ``RLIMIT_DATA``, not ``RLIMIT_AS``: the reader maps the model file read-only, which counts in
    the address space (a 3 GB model would need a 3 GB limit) but not in data (Linux 4.7 and
    later). Returns whether a limit is in force: on Windows none is set (a job object with a
    memory limit would do it, through ``ctypes``; not done yet), so there the reader's caps in
    ``dashboard.intake.caps`` are the only bound."""
    if WINDOWS:
        return False
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return True
