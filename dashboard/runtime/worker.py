"""The runtime worker: ``python -m dashboard.runtime.worker``.

All QNN work runs here, in a process of its own (locally, or on a device over SSH), so that a
native crash or hang of the runtime never takes the dashboard down. It speaks line-delimited JSON
on stdin/stdout:

- request:  ``{"id": 1, "cmd": "partition", "args": {...}}``
- progress: ``{"id": 1, "event": {...}}`` (any number, while the command runs)
- reply:    ``{"id": 1, "ok": true, "result": ...}`` or
            ``{"id": 1, "ok": false, "error": "one line", "kind": "user" | "internal"}``

The first line the worker writes is ``{"hello": {...host info...}}``. Native libraries print to
fd 1 too, so the protocol gets a private duplicate of stdout and fd 1 is pointed at stderr.

Commands are looked up lazily (``module:function``) so a worker only imports what it runs; each
handler is ``handler(args: dict, emit: Callable[[dict], None]) -> JSON-able result``.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Callable

from dashboard.errors import UserError

PROTOCOL_VERSION = 1

HANDLERS: dict[str, str] = {
    "hello": "dashboard.runtime.worker:hello",
    "probe": "dashboard.runtime.worker:probe",
    "put_model": "dashboard.runtime.worker:put_model",
    "has_model": "dashboard.runtime.worker:has_model",
    "crash": "dashboard.runtime.worker:crash",
    "ort_view": "dashboard.runtime.worker:ort_view",
    "partition": "dashboard.partition.measure:run",
    "timeline": "dashboard.timeline.runner:run_worker",
}


def model_store() -> Path:
    """Where model bytes sent over the protocol are kept on this host, one folder per digest."""
    root = Path(os.environ.get("QNN_LAB_MODEL_STORE", Path.home() / ".cache" / "qnn-backend-lab" / "models"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def hello(args: dict, emit: Callable[[dict], None]) -> dict:
    from dashboard.runtime.qnn import host_info

    return {"protocol": PROTOCOL_VERSION, **host_info()}


def probe(args: dict, emit: Callable[[dict], None]) -> dict:
    """Which backends initialize here, and whether the HTP shared-memory allocator works."""
    from dashboard.runtime.qnn import host_info, probe_backend, shared_memory_status, soc_info

    backends = {}
    for backend in args.get("backends", ["htp", "gpu", "cpu"]):
        emit({"kind": "probing", "backend": backend})
        result = probe_backend(backend)
        backends[backend] = {"ok": result.ok, "error": result.error, "seconds": round(result.seconds, 3)}
    shm_ok, shm_reason = shared_memory_status()
    return {**host_info(), "backends": backends, "soc": soc_info(),
            "shared_memory": {"ok": shm_ok, "reason": shm_reason}}


def put_model(args: dict, emit: Callable[[dict], None]) -> dict:
    """Receive a model in base64 chunks: ``{"digest", "name", "offset", "data", "final"}``.
    The file is written to a partial name and renamed once the final chunk checks out."""
    digest = str(args["digest"])
    if not digest.isalnum():
        raise UserError("bad model digest")
    name = Path(str(args["name"])).name or "model.onnx"
    folder = model_store() / digest
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (name + ".part")
    data = base64.b64decode(args["data"])
    with open(partial, "r+b" if args["offset"] else "wb") as handle:
        handle.seek(int(args["offset"]))
        handle.write(data)
    if not args.get("final"):
        return {"received": int(args["offset"]) + len(data)}
    actual = _digest_of(partial)
    if actual != digest:
        partial.unlink()
        raise UserError(f"model transfer corrupted (digest {actual} != {digest})")
    target = folder / name
    partial.replace(target)
    return {"path": str(target)}


def has_model(args: dict, emit: Callable[[dict], None]) -> dict:
    """The path of a model already on this host, by digest (``path`` is None if absent)."""
    folder = model_store() / str(args["digest"])
    found = [p for p in folder.glob("*") if not p.name.endswith(".part")] if folder.is_dir() else []
    return {"path": str(found[0]) if found else None}


def ort_view(args: dict, emit: Callable[[dict], None]) -> dict:
    """Write the graph as ONNX Runtime hands it to EPs (after level-1 optimizations) next to a
    temporary folder of the worker's, and return its path."""
    import tempfile

    from dashboard.runtime.qnn import optimized_model

    out_dir = Path(tempfile.mkdtemp(prefix="qnn-lab-ortview-"))
    return {"path": optimized_model(str(args["path"]), str(out_dir / "ort_view.onnx"), args.get("level", "basic"))}


def crash(args: dict, emit: Callable[[dict], None]) -> None:
    """Die the way a native crash does (tests of the crash path use this)."""
    import signal

    os.kill(os.getpid(), getattr(signal, args.get("signal", "SIGSEGV")))


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


def _resolve(cmd: str) -> Callable[[dict, Callable[[dict], None]], object]:
    target = HANDLERS.get(cmd)
    if target is None:
        raise UserError(f"unknown worker command {cmd!r}")
    module_name, func_name = target.split(":")
    return getattr(importlib.import_module(module_name), func_name)


def serve(stdin=None, out=None) -> None:
    """Answer requests until stdin closes."""
    stdin = stdin or sys.stdin
    if out is None:
        out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # native prints go to stderr, never into the protocol
        sys.stdout = sys.stderr

    def send(obj: dict) -> None:
        out.write(json.dumps(obj, default=str) + "\n")
        out.flush()

    send({"hello": {"protocol": PROTOCOL_VERSION, "pid": os.getpid()}})
    threading.Thread(target=_preload_runtime, daemon=True).start()
    for line in stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            req_id, cmd, args = request.get("id"), request["cmd"], request.get("args") or {}
        except (ValueError, KeyError, AttributeError) as exc:
            send({"id": None, "ok": False, "error": f"bad request: {exc}", "kind": "user"})
            continue
        try:
            result = _resolve(cmd)(args, lambda event, _id=req_id: send({"id": _id, "event": event}))
            send({"id": req_id, "ok": True, "result": result})
        except UserError as exc:
            send({"id": req_id, "ok": False, "error": str(exc), "kind": "user"})
        except Exception as exc:  # a bug in a handler must not kill the worker's other work
            traceback.print_exc(file=sys.stderr)
            send({"id": req_id, "ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": "internal"})


if __name__ == "__main__":
    serve()
