"""``--ray ADDRESS``: a sweep's cells as tasks on an existing Ray cluster.

Why each piece:

- Ray is an optional extra (``pip install "qnn-backend-lab[ray]"``) and this is the only module
  that imports it, when ``--ray`` is given: a sweep without it, the dashboard and the other
  commands never load it (``tests/test_layering.py``).
- A task does what a local cell does: ``run_cell`` on that node, whose QNN work runs in the
  project's runtime worker subprocess there. A native crash or hang of the QNN runtime costs that
  cell (a ``failed`` row), never the Ray worker; a Ray worker or node that dies all the same is
  that cell's ``failed`` row too (tasks are not retried: a retried crash would crash again).
- A model goes to the cluster once per content digest: the driver reads it and ``ray.put``s it
  into the object store the first time a cell of that digest is sent, and every task of that
  model gets the same object; a node writes it once into its own cache
  (``<QNN_LAB_CACHE>/sweep-models/<digest>/``), checked against the digest. The driver drops its
  reference once the sweep has moved past that model, so the object store holds the models of
  the cells in flight, not the zoo. A model's external-data files travel with it, in the same
  object: read through the intake (``load_model`` refuses a location that leaves the model's
  folder), at most the upload quota in all, each with its own digest, and written next to the
  node's copy under the same relative names (checked again there: a plain relative path inside
  that folder), so the runtime on the node finds them as it would next to the original.
- The nodes run the driver's own code: the ``dashboard`` package goes with the job
  (``runtime_env`` ``py_modules``), so a cell's key (which includes the project's version) means
  the same everywhere. The nodes need the project's dependencies (onnxruntime-qnn) installed.
- A loopback address (``127.0.0.1:PORT``, a cluster on this machine) makes Ray a single-machine
  client (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's own switch): without it Ray replaces the
  loopback address by the machine's network address and never reaches a head listening on
  loopback. Ray's usage statistics are off (``RAY_USAGE_STATS_ENABLED=0``): no outside request.
- ``auto`` is resolved here, not by Ray (``resolve_auto``): Ray's own ``auto`` follows an address
  file in a folder every local user may write, and without one joins any cluster it finds running
  on the machine. The address found gets the checks of a given one, and a head is asked for its
  gRPC greeting with a deadline before Ray is (``_check_reachable``): Ray retries a stale address
  for many minutes. Ray asks no credentials by default, so a cluster's session folder that other
  users can write is warned about (``session_warning``); docs/sweeps.md gives the safe setup.
- As many cells run at once as the cluster has CPUs (each task asks for one), taken lazily from
  the sweep. Ctrl-C or a Cancel cancels the tasks in flight (``ray.cancel(force=True)``: their Ray
  workers end, and each runtime worker exits when its stdin closes).
"""

from __future__ import annotations

import ipaddress
import os
import platform as host_platform
import re
import socket
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from dashboard import platform
from dashboard.errors import UserError
from dashboard.printable import plain
from dashboard.sweep.cells import Cell, CellProgress, CellResult, RunOne

if TYPE_CHECKING:
    from dashboard.runtime.jobs import Cancellation

EXTRA = 'pip install "qnn-backend-lab[ray]" (in a checkout: pip install ".[ray]")'
EXECUTOR = "ray"
CONNECT_TIMEOUT_S = 10.0
WAIT_S = 0.5  # how often the driver looks at a Cancel while it waits for a task
_LOOPBACK_NAMES = ("localhost", "ip6-localhost")
ADDRESS_FILE = "ray_current_cluster"
MAX_ADDRESS_BYTES = 1024
_ADDRESS = re.compile(r"[A-Za-z0-9._\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}|[0-9A-Fa-f:.]+:\d{1,5}")
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0


def ray_executor(address: str) -> "RayExecutor":
    """Connected to the cluster at ``address`` (``host:port`` of its head, ``ray://...`` for Ray
    Client, or ``auto``: ``RAY_ADDRESS``, else the cluster ``ray start`` recorded on this machine,
    read by ``resolve_auto``); one ``UserError`` line when Ray is missing, ``auto`` finds nothing
    it may trust, or the cluster cannot be reached. The address ``auto`` found gets the same
    checks as one given, and the line saying what it found is printed once they pass."""
    address = (address or "").strip()
    if not address:
        raise UserError("--ray needs the cluster's address (HOST:PORT of its head) or auto")
    label, found = f"--ray {address}", None
    if address == "auto":
        address, source = resolve_auto()
        label, found = f"--ray auto ({address}, from {source})", f"ray: auto is the cluster at {address}, from {source}"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if _is_loopback(address):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray, which is not installed here: {EXTRA}") from None
    _check_reachable(address, label)
    if found:
        print(found, file=sys.stderr, flush=True)
    return RayExecutor(ray, address, label)


# -- auto ---------------------------------------------------------------------------------------------
def resolve_auto() -> tuple[str, str]:
    """What ``auto`` names, and where it was found: ``RAY_ADDRESS`` when set (the user's own
    environment, as Ray reads it first), else the address file ``ray start`` wrote
    (``address_file``), trusted only as ``read_address_file`` says. Ray's own ``auto`` would
    follow that file whoever wrote it (Ray makes its folder writable by every user, without the
    sticky bit) and, with no file, connect to any Ray cluster running on the machine, another
    user's included; this never does either."""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env and env != "auto":
        _host_port(env, f"--ray auto (RAY_ADDRESS={plain(env)})")
        return env, "RAY_ADDRESS"
    path = address_file()
    return read_address_file(path), str(path)


def address_file() -> Path:
    """Where Ray 2.60 records the cluster ``ray start`` last started on this machine
    (``ray._common.utils.get_ray_address_file``, rebuilt here from its public rule because that
    module is private): ``<RAY_TMPDIR, else TMPDIR on Linux, else /tmp>/ray/ray_current_cluster``
    (the platform's temp folder on Windows)."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        import tempfile

        base = tempfile.gettempdir()
    return Path(base) / "ray" / ADDRESS_FILE


def read_address_file(path: Path) -> str:
    """The head address in Ray's address file, if this user may trust it: a regular file (not a
    symlink, opened without following one, checked on the open descriptor so nothing is swapped
    in between) that this user owns, that no other user may write (no group or other write bit)
    and that has no other hard link. Why not also its folder: Ray makes ``<tmp>/ray`` writable by
    every user, so another user can remove or replace the file, but whatever they put there is
    theirs, or a hard link to a file of this user's, and is refused; refusing the folder itself
    would refuse every cluster Ray starts by default."""
    where = f"--ray auto: {path}"
    try:
        fd = platform.open_regular(path)
    except FileNotFoundError:
        raise UserError(f"--ray auto: no Ray cluster is recorded on this machine ({path} does not exist); start one "
                        "(ray start --head) or give its address, --ray HOST:PORT") from None
    except OSError as exc:
        raise UserError(f"{where}: refusing it, it is not a regular file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        why = platform.foreign_owner(info) or platform.writable_by_others(info) \
            or (f"has {info.st_nlink} hard links" if info.st_nlink > 1 else None)
        if why:
            raise UserError(f"{where}: refusing it, it {why}; the sweep would send its models and code to whatever "
                            "cluster it names (give the address yourself, --ray HOST:PORT; a file you wrote: "
                            "chmod go-w it)")
        data = handle.read(MAX_ADDRESS_BYTES + 1)
    text = data.decode("ascii", errors="replace").strip()
    if len(data) > MAX_ADDRESS_BYTES or not _ADDRESS.fullmatch(text):
        raise UserError(f"{where}: it does not hold a head's address (HOST:PORT)")
    _host_port(text, where)
    return text


# -- reachable ----------------------------------------------------------------------------------------
def _host_port(address: str, label: str | None = None) -> tuple[str, int] | None:
    """``host:port`` / ``[v6]:port`` of a head's address; None for ``auto`` and ``ray://`` ones."""
    if "://" in address or address == "auto":
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise UserError(f"{label or f'--ray {plain(address)!r}'}: the cluster's address is HOST:PORT of its head "
                        "(or auto)")
    return host.strip("[]"), int(port)


def _check_reachable(address: str, label: str) -> None:
    """Before Ray is asked to connect: a TCP connection to the head, and one HTTP/2 settings
    exchange on it (the GCS is a gRPC server, which answers the client preface with its SETTINGS
    frame), each bounded by ``CONNECT_TIMEOUT_S``. Why: Ray itself waits without end (retrying
    for minutes) for a head that is not there or a port that something else now holds, a stale
    address file's usual state, and the sweep must say so in one line instead. (A cluster
    using TLS, ``RAY_USE_TLS``, gets the TCP connection only.)"""
    target = _host_port(address, label)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=CONNECT_TIMEOUT_S) as connection:
            if os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
                answer = _http2_settings(connection)
                if answer:
                    raise UserError(f"{label}: no Ray cluster answers there ({answer}); is its head running there "
                                    "(ray start --head)?")
    except OSError as exc:
        reason = "no answer" if isinstance(exc, socket.timeout) else exc.strerror or exc
        raise UserError(f"{label}: cannot reach the Ray cluster ({reason}); is its head running there "
                        "(ray start --head)?") from None


def _http2_settings(connection: socket.socket) -> str | None:
    """Why the peer is not an HTTP/2 (gRPC) server, or None when it answers the client preface
    with a SETTINGS frame on stream 0 as RFC 9113 (section 3.4) requires; the answer's 9 bytes
    must all come within ``CONNECT_TIMEOUT_S`` (a peer sending one byte at a time gets no more)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    connection.sendall(HTTP2_PREFACE + EMPTY_SETTINGS)
    head = b""
    while len(head) < 9:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("no HTTP/2 answer in time")
        connection.settimeout(left)
        chunk = connection.recv(9 - len(head))
        if not chunk:
            return "it closed the connection without an HTTP/2 answer"
        head += chunk
    if head[3] != 0x4 or int.from_bytes(head[5:9], "big") & 0x7FFFFFFF:
        return "it does not speak gRPC"
    return None


def _is_loopback(address: str) -> bool:
    host = address.split("://", 1)[-1]
    host = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0]
    host = host.rsplit("@", 1)[-1]
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RayExecutor:
    """A ``cells.Executor`` on one Ray cluster. ``shipped``: the models (by digest) this executor
    put into the object store, ``cells``: the cells it sent (docs/sweeps.md's per-cell figures)."""

    def __init__(self, ray, address: str, label: str | None = None) -> None:
        self.ray = ray
        self.address = address
        self.label = label or f"--ray {address}"
        self.shipped = 0
        self.cells = 0
        self._connect()

    def _connect(self) -> None:
        import dashboard

        package = Path(dashboard.__file__).resolve().parent
        try:
            context = self.ray.init(address=self.address, log_to_driver=False, logging_level="WARNING",
                                    runtime_env={"py_modules": [str(package)], "excludes": ["__pycache__", "*.pyc"]})
        except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, Ray's own: one line
            raise UserError(f"{self.label}: cannot reach the Ray cluster ({_first_line(exc)}; a cluster with token "
                            "authentication takes a sweep run with RAY_AUTH_MODE=token and its token)") from None
        self._task = self.ray.remote(num_cpus=1, max_retries=0)(run_on_node)
        warning = session_warning(getattr(context, "address_info", {}).get("session_dir"))
        if warning:
            print(f"warning: {warning}", file=sys.stderr, flush=True)

    def width(self) -> int:
        """Cells in flight: the cluster's CPUs (each task takes one)."""
        return max(int(self.ray.cluster_resources().get("CPU", 1)), 1)

    def __call__(self, cells: Iterable[Cell], run_one: RunOne, *, jobs: int = 0,
                 progress: CellProgress | None = None, cancel: Cancellation | None = None) -> Iterator[CellResult]:
        from dashboard.runtime.jobs import Cancellation

        cancel = cancel or Cancellation()
        width = jobs or self.width()
        models = _Shipments(self.ray)
        source = iter(cells)
        running: dict = {}  # ObjectRef -> Cell
        try:
            while True:
                while len(running) < width and not cancel.cancelled:
                    cell = next(source, None)
                    if cell is None:
                        break
                    try:
                        model = models.ref(cell)
                    except (OSError, UserError) as exc:
                        reason = exc.strerror or exc if isinstance(exc, OSError) else exc
                        yield CellResult.failure(cell, f"cannot read the model to send it to the cluster "
                                                       f"({reason})", executor=EXECUTOR)
                        continue
                    running[self._task.remote(cell, model, run_one)] = cell
                    self.cells += 1
                if not running:
                    break
                done, _ = self.ray.wait(list(running), num_returns=1, timeout=WAIT_S)
                if cancel.cancelled:
                    break
                for ref in done:
                    cell = running.pop(ref)
                    models.finished(cell)
                    yield self._collect(ref, cell)
            cancel.check()
        finally:
            for ref in running:
                self.ray.cancel(ref, force=True)
            self.shipped = models.count
            models.clear()
            self.close()
            print(f"ray: {self.shipped} model(s) sent to the cluster's object store for {self.cells} cell(s)",
                  file=sys.stderr, flush=True)

    def _collect(self, ref, cell: Cell) -> CellResult:
        """The task's result; a task that died (its Ray worker or node gone) is a failed row."""
        try:
            return self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - RayTaskError, WorkerCrashedError, NodeDiedError ...
            return CellResult.failure(cell, f"the Ray task failed: {_first_line(exc)}", executor=EXECUTOR)

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()


def session_warning(session_dir: str | None) -> str | None:
    """What to say when the cluster's session folder, on this machine, may be written by other
    users: it holds the cluster's sockets, logs and the code of the sweep's tasks (the
    ``runtime_env`` packages), so another user who can write there can change what the tasks
    run. Ray makes its temp and session folders mode 0777 (without the sticky bit) wherever they
    are, so what decides is whether others can reach them: a private ``--temp-dir`` (below a
    folder only its owner may enter) keeps them out. None when no other user can write it, or
    the folder is not on this machine."""
    if not session_dir or platform.WINDOWS:
        return None
    folder = Path(session_dir)
    try:
        writable = folder.stat().st_mode & 0o002
        reachable = all(parent.stat().st_mode & 0o001 for parent in folder.parents)
    except OSError:
        return None
    if not (writable and reachable):
        return None
    return (f"the Ray cluster's session folder {plain(folder)} is writable by every user of this machine, who can "
            "change the code its tasks run; start the cluster with a private --temp-dir and token authentication "
            "(docs/sweeps.md, Executors)")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:400]


class _Shipments:
    """The object-store copy of each model in flight, put once per digest. Cells come model by
    model, so a digest's object is dropped once none of its cells runs and a later model's cell
    has been sent (the sweep moved on); a model met again is put again."""

    def __init__(self, ray) -> None:
        self.ray = ray
        self.count = 0
        self._refs: dict[str, list] = {}  # digest -> [ObjectRef, cells in flight]
        self._latest: str | None = None
        self._lock = threading.Lock()

    def ref(self, cell: Cell):
        with self._lock:
            entry = self._refs.get(cell.digest)
            if entry is None:
                data = (Path(cell.path).read_bytes(), external_files(cell.path))
                entry = self._refs[cell.digest] = [self.ray.put(data), 0]
                self.count += 1
                del data
            entry[1] += 1
            previous, self._latest = self._latest, cell.digest
            if previous is not None and previous != cell.digest:
                self._drop_idle(keep=cell.digest)
            return entry[0]

    def finished(self, cell: Cell) -> None:
        with self._lock:
            entry = self._refs.get(cell.digest)
            if entry is not None:
                entry[1] -= 1
            self._drop_idle(keep=self._latest)

    def _drop_idle(self, keep: str | None) -> None:
        for digest in [d for d, (_, n) in self._refs.items() if n <= 0 and d != keep]:
            del self._refs[digest]

    def clear(self) -> None:
        with self._lock:
            self._refs.clear()


External = tuple[str, bytes, str]  # (location relative to the model's folder, bytes, content digest)


def external_files(path: str) -> list[External]:
    """The external-data files the model at ``path`` names, read to go with it. The intake reads
    the model (refusing a location outside its folder: absolute, ``..`` out, a symlink out); a
    missing file or more than the upload quota in all is a ``UserError``: that cell fails."""
    from dashboard.intake.digest import content_hasher
    from dashboard.intake.overview import sizes
    from dashboard.intake.reader import load_model
    from dashboard.intake.uploads import quota

    names = sizes(load_model(path)).external_files
    folder = Path(path).parent
    total, limit = sum((folder / name).stat().st_size for name in names), quota()
    if total > limit:
        raise UserError(f"its external-data files hold {total} bytes, more than the upload quota of {limit} bytes "
                        "(QNN_LAB_UPLOAD_QUOTA)")
    found = []
    for name in names:
        data = (folder / name).read_bytes()
        hasher = content_hasher()
        hasher.update(data)
        found.append((name, data, hasher.hexdigest()))
    return found


# -- on the node -------------------------------------------------------------------------------------
def run_on_node(cell: Cell, model: tuple[bytes, list[External]], run_one: RunOne) -> CellResult:
    """A Ray task: ``run_one`` on this node's copy of the model (and of its external-data files),
    the record naming the node."""
    import ray

    from dashboard.runtime.jobs import Cancellation

    context = ray.get_runtime_context()
    where = f"{context.get_node_id()} ({ray.util.get_node_ip_address()})"
    data, externals = model
    try:
        local = node_copy(cell.digest, Path(cell.path).name, data)
        for location, content, digest in externals:
            external_copy(local.parent, location, content, digest)
    except (OSError, ValueError) as exc:
        return CellResult.failure(cell, f"cannot store the model on the Ray node: {exc}", executor=EXECUTOR,
                                  node=where)
    result = run_one(replace(cell, path=str(local)), Cancellation())
    result.cell = cell  # the record names the model as the spec does, not the node's copy
    result.executor, result.node, result.host = EXECUTOR, where, host_platform.node()
    return result


def node_copy(digest: str, name: str, data: bytes) -> Path:
    """This node's file for ``digest``, written once (atomically, so two tasks of the model on one
    node never read half a file; 0600 in folders 0700) and checked against the digest it was sent under."""
    from dashboard.intake.digest import content_hasher

    if not digest.isalnum() or "/" in name or "\\" in name or name in ("", ".", ".."):
        raise ValueError(f"refusing digest {digest!r} / name {name!r}")
    cache = Path(os.environ.get("QNN_LAB_CACHE") or Path.home() / ".cache" / "qnn-backend-lab")
    folder = cache / "sweep-models" / digest
    target = folder / name
    if target.is_file() and target.stat().st_size == len(data):
        return target
    hasher = content_hasher()
    hasher.update(data)
    if hasher.hexdigest() != digest:
        raise ValueError(f"the model's bytes do not match its digest {digest}")
    platform.private_folder(folder)
    _write_replacing(folder / f".{name}.{os.getpid()}.{threading.get_ident()}.part", data, target)
    return target



def external_copy(folder: Path, location: str, data: bytes, digest: str) -> Path:
    """One external-data file next to the node's copy of its model, under the location the model
    names; a location that is not a plain relative path inside ``folder`` (absolute, ``..``, a
    symlink out) is refused, and the bytes are checked against their digest before any write."""
    from dashboard.intake.digest import content_hasher
    from dashboard.intake.reader import location_problem

    problem = location_problem(folder.resolve(), location)
    if problem is None and ".." in Path(location).parts:
        problem = "which is not a plain relative path"
    if problem:
        raise ValueError(f"refusing external-data location {location!r}, {problem}")
    hasher = content_hasher()
    hasher.update(data)
    if hasher.hexdigest() != digest:
        raise ValueError(f"the bytes of {location!r} do not match their digest {digest}")
    target = folder / location
    if target.is_file() and not target.is_symlink() and target.stat().st_size == len(data) \
            and target.read_bytes() == data:
        return target
    platform.private_folder(target.parent)
    _write_replacing(target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.part", data, target)
    return target


def _write_replacing(temporary: Path, data: bytes, target: Path) -> None:
    """``data`` into ``temporary`` (0600: the node's copies are the user's models), renamed over
    ``target``; a leftover of a killed task under the same name is removed first."""
    temporary.unlink(missing_ok=True)
    platform.write_private(temporary, data)
    os.replace(temporary, target)
