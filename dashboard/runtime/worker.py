"""The runtime worker: ``python -m dashboard.runtime.worker``.

All QNN work runs here, in a process of its own (locally, or on a device over SSH), so that a
native crash or hang of the runtime never takes the dashboard down. It speaks line-delimited JSON
on stdin/stdout, in the records of ``dashboard.runtime.protocol``:

- first line: ``{"hello": WorkerHello}``;
- request:  ``WorkerRequest`` ``{"id": 1, "cmd": "partition", "args": {...}}``;
- progress: ``WorkerProgress`` ``{"id": 1, "event": {"type": ..., ...}}`` (any number);
- reply:    ``WorkerReply`` ``{"id": 1, "ok": true, "result": ...}`` or
            ``{"id": 1, "ok": false, "error": "one line", "kind": "user" | "internal"}``.

A request's arguments are checked against its command's record (``protocol.COMMANDS``) before the
handler runs, so a handler only ever sees well-formed, typed arguments. Native libraries print to
fd 1 too, so the protocol gets a private duplicate of stdout and fd 1 is pointed at stderr. No line
is longer than ``protocol.MAX_LINE`` in either direction.

stdin closing means the client is gone (it died, was killed, or its SSH connection dropped: sshd
then closes the remote command's stdin). Requests run on the main thread, where a native call can
block for minutes, so stdin is read by a watchdog thread: at end of input it removes the scratch
folders of the request in progress (``dashboard.runtime.scratch``) and ends the process at once
(``os._exit``), without waiting for the compile to finish. Nobody would read its answer.

Handlers are looked up lazily (``module:function``) so a worker only imports what it runs; each is
``handler(args: <record>, emit: Callable[[event record], None]) -> <result record>``. The command
table is the protocol's registry (``protocol.COMMANDS``): the runtime's own commands are there from
the start, and a command it does not know yet (``partition``, ``timeline``) makes the registry
import the capability modules named in ``protocol.CAPABILITY_PROTOCOLS``, which register theirs.
Why not import them here: partition and timeline are built on the runtime, so a module-level
import would close a cycle and make every worker start import numpy and onnx before its greeting,
including the ones that only probe a device.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import os
import queue
import sys
import threading
import traceback
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from dashboard import __version__, platform
from dashboard.errors import UserError
from dashboard.runtime import scratch
from dashboard.runtime.protocol import (COMMANDS, HEAD_STARTS, MAX_LINE, PROTOCOL_VERSION, BackendProbe, ChunkReceived,
                                        Command, CrashArgs, DigestArgs, HostInfo, ModelChunk, ModelLocation, NoArgs,
                                        OrtViewArgs, ProbeArgs, ProbeResult, Probing, SharedMemoryProbe, WorkerHello,
                                        WorkerProgress, WorkerReply, WorkerRequest, check_file_name, read_line)
from dashboard.serde import Record, SchemaError, dumps, load, loads

Emit = Callable[[Record], None]
EXIT_ORPHANED = 3  # the client went away while a request ran; the request was abandoned


def model_store() -> Path:
    """Where model bytes sent over the protocol are kept on this host, one folder per digest; made
    private (0700, ``platform.private_folder``): the models are the user's."""
    root = Path(os.environ.get("QNN_LAB_MODEL_STORE", Path.home() / ".cache" / "qnn-backend-lab" / "models"))
    platform.private_folder(root)
    return root


def hello(args: NoArgs, emit: Emit) -> HostInfo:
    from dashboard.runtime.qnn import host_info

    return HostInfo(**host_info())


def probe(args: ProbeArgs, emit: Emit) -> ProbeResult:
    """Which backends initialize here, and whether the HTP shared-memory allocator works."""
    from dashboard.runtime.qnn import host_info, probe_backend, shared_memory_status, soc_info

    backends = {}
    for backend in args.backends:
        emit(Probing(backend))
        result = probe_backend(backend)
        backends[backend] = BackendProbe(result.ok, result.error, round(result.seconds, 3))
    shm_ok, shm_reason = shared_memory_status()
    return ProbeResult(**host_info(), backends=backends, soc=soc_info(),
                       shared_memory=SharedMemoryProbe(shm_ok, shm_reason))


def put_model(args: ModelChunk, emit: Emit) -> ChunkReceived:
    """Receive a model in base64 chunks. The file is written to a partial name and renamed once
    the final chunk checks out (``ModelChunk`` has already checked the digest is hex and the name
    a plain file name). Nothing planted in the store is written through: the digest folder must
    be a real folder, and the partial file is opened without following a symlink."""
    folder = _digest_folder(args.digest, create=True)
    partial = folder / (args.name + ".part")
    data = base64.b64decode(args.data)
    flags = os.O_WRONLY | os.O_CREAT | (0 if args.offset else os.O_TRUNC)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(partial, flags, 0o600)
    except OSError as exc:
        raise UserError(f"cannot write {partial.name} in the model store: {exc.strerror}") from None
    with open(fd, "wb") as handle:
        handle.seek(args.offset)
        handle.write(data)
    if not args.final:
        return ChunkReceived(received=args.offset + len(data))
    actual = _digest_of(partial)
    if actual != args.digest:
        partial.unlink()
        raise UserError(f"model transfer corrupted (digest {actual} != {args.digest})")
    target = folder / args.name
    partial.replace(target)
    return ChunkReceived(path=str(target))


def has_model(args: DigestArgs, emit: Emit) -> ModelLocation:
    """The path of a model already on this host, by digest (``path`` is None if absent). Only a
    regular file directly in a real digest folder counts: a symlink planted in the store is not
    followed, so the answer never names a file outside it."""
    folder = _digest_folder(args.digest, create=False)
    if folder is None:
        return ModelLocation(None)
    with os.scandir(folder) as entries:
        found = sorted(e.path for e in entries if e.is_file(follow_symlinks=False) and _plain_name(e.name))
    return ModelLocation(found[0] if found else None)


def _digest_folder(digest: str, create: bool) -> Path | None:
    folder = model_store() / digest
    if folder.is_symlink():
        raise UserError(f"the model store entry {digest} is a symlink; refusing to use it")
    if create:
        folder.mkdir(mode=0o700, exist_ok=True)
    return folder if folder.is_dir() else None


def _plain_name(name: str) -> bool:
    try:
        check_file_name(name)
    except SchemaError:
        return False
    return True


def ort_view(args: OrtViewArgs, emit: Emit) -> ModelLocation:
    """Write the graph as ONNX Runtime hands it to EPs (after level-1 optimizations) into the
    client's folder ``args.out_dir`` and return its path (the client removes the folder, also when
    this worker dies half-way)."""
    from dashboard.runtime.qnn import optimized_model

    out_dir = Path(args.out_dir)
    if not out_dir.is_dir():
        raise UserError(f"ort_view: {args.out_dir} is not a folder on this host")
    return ModelLocation(optimized_model(args.path, str(out_dir / "ort_view.onnx"), args.level))


def crash(args: Record, emit: Emit) -> None:
    """Die the way a native crash does (tests of the crash path use this, also in place of
    another command's handler, so ``args`` may be any record)."""
    platform.die(getattr(args, "signal", CrashArgs.signal))


def _digest_of(path: Path) -> str:
    from dashboard.intake.digest import file_digest

    return file_digest(path)


def _preload_runtime() -> None:
    """Import onnxruntime and register the QNN EP while the first request is still on its way
    (the caller is reading or sending the model meanwhile). Failures are left for the request
    that needs the runtime to report; Python's import lock makes that request wait for this."""
    try:
        from dashboard.runtime.qnn import register

        register()
    except Exception:  # noqa: BLE001 - reported by the first request that needs the runtime
        pass


def _imported(name: str) -> Callable:
    """The function a ``"module:function"`` name of the protocol's tables names, imported."""
    module_name, func_name = name.split(":")
    return getattr(importlib.import_module(module_name), func_name)


def _head_start(request: WorkerRequest) -> contextlib.AbstractContextManager:
    """The command's head start around its request (``HEAD_STARTS``), entered before the request is
    decoded; none for the other commands."""
    name = HEAD_STARTS.get(request.cmd)
    return contextlib.nullcontext() if name is None else _imported(name)(request.args)


def _resolve(cmd: str) -> tuple[Command, Callable[[Record, Emit], Record | None]]:
    try:
        command = COMMANDS[cmd]
    except KeyError:
        raise UserError(f"unknown worker command {cmd!r}") from None
    return command, _imported(command.handler)


def _answer(request: WorkerRequest, send: Callable[[Record], None]) -> WorkerReply:
    """Run one request; every failure becomes a reply, so one bad request never ends the worker."""
    try:
        with _head_start(request):
            command, handler = _resolve(request.cmd)
            args = load(command.args, request.args, f"{request.cmd} arguments")
            result = handler(args, lambda event: send(WorkerProgress(request.id, event.to_json())))
        return WorkerReply(request.id, True, result=None if result is None else result.to_json())
    except UserError as exc:
        return WorkerReply(request.id, False, error=str(exc), kind="user")
    except Exception as exc:  # a bug in a handler must not kill the worker's other work
        traceback.print_exc(file=sys.stderr)
        return WorkerReply(request.id, False, error=f"{type(exc).__name__}: {exc}", kind="internal")


class _Inbox:
    """Request lines from stdin, read on a watchdog thread (see the module docstring): iterating
    yields each line while the client is there; at end of input an idle worker's iteration ends,
    a busy worker exits at once."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._lines: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._busy = False
        self._closed = False
        threading.Thread(target=self._read, args=(stdin,), daemon=True, name="stdin-watchdog").start()

    def _read(self, stdin: BinaryIO) -> None:
        while True:
            line = read_line(stdin)
            if line is None:
                if not _skip_rest(stdin):
                    break
                line = _TOO_LONG
            elif not line:
                break
            self._lines.put(line)
        with self._lock:
            self._closed = True
            if self._busy:
                _exit_orphaned("the client closed the connection")
        self._lines.put(None)

    def __iter__(self) -> Iterator[bytes | None]:
        """Lines, ``None`` standing for one that was too long."""
        while True:
            line = self._lines.get()
            with self._lock:
                if line is None or self._closed:
                    return
                self._busy = True
            try:
                yield None if line is _TOO_LONG else line
            finally:
                self.idle()

    def idle(self) -> None:
        """The request is answered (its reply is about to be written): a client that closes the
        connection from now on is leaving, not abandoning work."""
        with self._lock:
            self._busy = False


_TOO_LONG = object()


def _skip_rest(stdin: BinaryIO) -> bool:
    """Discard the rest of an over-long line; False if input ended first."""
    while True:
        chunk = stdin.readline(MAX_LINE + 1)
        if not chunk or chunk.endswith(b"\n"):
            return bool(chunk)


def _exit_orphaned(why: str) -> None:
    """Remove the running request's scratch folders and end the process now."""
    scratch.remove_all()
    try:
        os.write(2, f"worker {os.getpid()}: {why}; abandoning the request in progress\n".encode())
    finally:
        os._exit(EXIT_ORPHANED)


class _Writer:
    """The protocol's stdout: one record per line, whole lines only (handlers emit from several
    threads), none longer than ``MAX_LINE``."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.lock = threading.Lock()

    def send(self, record: Record | dict) -> None:
        line = dumps(record).encode()
        if len(line) >= MAX_LINE:
            if not isinstance(record, WorkerReply):
                return  # a progress event that large is a bug; dropping it keeps the stream valid
            line = dumps(WorkerReply(record.id, False, kind="internal", error=(
                f"the result is {len(line):,} bytes, over the protocol's line limit of {MAX_LINE:,} bytes"
            ))).encode()
        try:
            with self.lock:
                self.out.write(line + b"\n")
                self.out.flush()
        except (BrokenPipeError, OSError):
            _exit_orphaned("the client stopped reading")


def serve(stdin: BinaryIO | None = None, out: BinaryIO | None = None) -> None:
    """Answer requests until stdin closes."""
    stdin = stdin or sys.stdin.buffer
    if out is None:
        out = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)  # native prints go to stderr, never into the protocol
        sys.stdout = sys.stderr
    writer = _Writer(out)
    writer.send({"hello": WorkerHello(PROTOCOL_VERSION, os.getpid(), __version__)})
    threading.Thread(target=_preload_runtime, daemon=True).start()
    inbox = _Inbox(stdin)
    for line in inbox:
        if line is None:
            writer.send(WorkerReply(None, False, error=f"bad request: longer than {MAX_LINE >> 20} MB", kind="user"))
            continue
        line = line.strip()
        if not line:
            continue
        try:
            request = loads(WorkerRequest, line, "request")
        except SchemaError as exc:
            writer.send(WorkerReply(None, False, error=f"bad request: {exc}", kind="user"))
            continue
        reply = _answer(request, writer.send)
        inbox.idle()
        writer.send(reply)


def main() -> None:
    """Serve, then end the process without the interpreter's teardown: every request has already
    released its sessions and scratch folders, and unloading QNN and Python's modules (about 0.1 s)
    is time the client spends waiting for this process to end, so that none outlives its job."""
    serve()
    scratch.remove_all()  # none should be left; this exit skips every finalizer
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
