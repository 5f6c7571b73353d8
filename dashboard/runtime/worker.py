"""The runtime worker: ``python -m dashboard.runtime.worker``.

All QNN work runs here, in a process of its own (locally, or on a device over SSH), so that a
native crash or hang of the runtime never takes the dashboard down. It speaks line-delimited JSON
on stdin/stdout, in the records of ``dashboard.messages``:

- first line: ``{"hello": WorkerHello}``;
- request:  ``WorkerRequest`` ``{"id": 1, "cmd": "partition", "args": {...}}``;
- progress: ``WorkerProgress`` ``{"id": 1, "event": {"type": ..., ...}}`` (any number);
- reply:    ``WorkerReply`` ``{"id": 1, "ok": true, "result": ...}`` or
            ``{"id": 1, "ok": false, "error": "one line", "kind": "user" | "internal"}``.

A request's arguments are checked against its command's record (``messages.COMMANDS``) before the
handler runs, so a handler only ever sees well-formed, typed arguments. Native libraries print to
fd 1 too, so the protocol gets a private duplicate of stdout and fd 1 is pointed at stderr.

Handlers are looked up lazily (``module:function``) so a worker only imports what it runs; each is
``handler(args: <record>, emit: Callable[[event record], None]) -> <result record>``.
"""

from __future__ import annotations

import base64
import importlib
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Callable

from dashboard import messages
from dashboard.errors import UserError
from dashboard.messages import (PROTOCOL_VERSION, BackendProbe, ChunkReceived, CrashArgs, DigestArgs, HostInfo,
                                ModelChunk, ModelLocation, NoArgs, OrtViewArgs, ProbeArgs, ProbeResult, Probing,
                                SharedMemoryProbe, WorkerHello, WorkerProgress, WorkerReply, WorkerRequest)
from dashboard.serde import Record, SchemaError, dumps, load, loads

Emit = Callable[[Record], None]


def model_store() -> Path:
    """Where model bytes sent over the protocol are kept on this host, one folder per digest."""
    root = Path(os.environ.get("QNN_LAB_MODEL_STORE", Path.home() / ".cache" / "qnn-backend-lab" / "models"))
    root.mkdir(parents=True, exist_ok=True)
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
    the final chunk checks out (``ModelChunk`` has already checked the digest is hex)."""
    name = Path(args.name).name or "model.onnx"
    folder = model_store() / args.digest
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (name + ".part")
    data = base64.b64decode(args.data)
    with open(partial, "r+b" if args.offset else "wb") as handle:
        handle.seek(args.offset)
        handle.write(data)
    if not args.final:
        return ChunkReceived(received=args.offset + len(data))
    actual = _digest_of(partial)
    if actual != args.digest:
        partial.unlink()
        raise UserError(f"model transfer corrupted (digest {actual} != {args.digest})")
    target = folder / name
    partial.replace(target)
    return ChunkReceived(path=str(target))


def has_model(args: DigestArgs, emit: Emit) -> ModelLocation:
    """The path of a model already on this host, by digest (``path`` is None if absent)."""
    folder = model_store() / args.digest
    found = [p for p in folder.glob("*") if not p.name.endswith(".part")] if folder.is_dir() else []
    return ModelLocation(str(found[0]) if found else None)


def ort_view(args: OrtViewArgs, emit: Emit) -> ModelLocation:
    """Write the graph as ONNX Runtime hands it to EPs (after level-1 optimizations) into a
    temporary folder of the worker's, and return its path (the caller removes the folder)."""
    import tempfile

    from dashboard.runtime.qnn import optimized_model

    out_dir = Path(tempfile.mkdtemp(prefix="qnn-lab-ortview-"))
    return ModelLocation(optimized_model(args.path, str(out_dir / "ort_view.onnx"), args.level))


def crash(args: Record, emit: Emit) -> None:
    """Die the way a native crash does (tests of the crash path use this, also in place of
    another command's handler, so ``args`` may be any record)."""
    import signal

    os.kill(os.getpid(), getattr(signal, getattr(args, "signal", CrashArgs.signal)))


def _digest_of(path: Path) -> str:
    from dashboard.intake.reader import file_digest

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


def _resolve(cmd: str) -> tuple[messages.Command, Callable[[Record, Emit], Record | None]]:
    command = messages.COMMANDS.get(cmd)
    if command is None:
        raise UserError(f"unknown worker command {cmd!r}")
    module_name, func_name = command.handler.split(":")
    return command, getattr(importlib.import_module(module_name), func_name)


def _answer(request: WorkerRequest, send: Callable[[Record], None]) -> WorkerReply:
    """Run one request; every failure becomes a reply, so one bad request never ends the worker."""
    try:
        command, handler = _resolve(request.cmd)
        args = load(command.args, request.args, f"{request.cmd} arguments")
        result = handler(args, lambda event: send(WorkerProgress(request.id, event.to_json())))
        return WorkerReply(request.id, True, result=None if result is None else result.to_json())
    except UserError as exc:
        return WorkerReply(request.id, False, error=str(exc), kind="user")
    except Exception as exc:  # a bug in a handler must not kill the worker's other work
        traceback.print_exc(file=sys.stderr)
        return WorkerReply(request.id, False, error=f"{type(exc).__name__}: {exc}", kind="internal")


def serve(stdin=None, out=None) -> None:
    """Answer requests until stdin closes."""
    stdin = stdin or sys.stdin
    if out is None:
        out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # native prints go to stderr, never into the protocol
        sys.stdout = sys.stderr
    lock = threading.Lock()  # handlers emit from several threads

    def send(record: Record) -> None:
        with lock:
            out.write(dumps(record) + "\n")
            out.flush()

    with lock:
        out.write(dumps({"hello": WorkerHello(PROTOCOL_VERSION, os.getpid())}) + "\n")
        out.flush()
    threading.Thread(target=_preload_runtime, daemon=True).start()
    for line in stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = loads(WorkerRequest, line, "request")
        except SchemaError as exc:
            send(WorkerReply(None, False, error=f"bad request: {exc}", kind="user"))
            continue
        send(_answer(request, send))


if __name__ == "__main__":
    serve()
