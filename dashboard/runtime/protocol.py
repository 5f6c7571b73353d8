"""The worker protocol's one mechanism, and the device's own messages: the envelope every line
travels in, the capped line reader both ends use, the registries of commands and progress events,
and the records of the commands every worker answers (hello, probe, doctor, models, ort_view).

The protocol (``dashboard.runtime.worker`` and ``dashboard.runtime.client``) is line-delimited
JSON. The worker greets with ``WorkerHello``; each ``WorkerRequest`` is answered by any number of
``WorkerProgress`` lines and one ``WorkerReply``. ``COMMANDS`` names, per command, the record its
arguments must be, the record its result must be, and the handler that runs it: the worker checks
arguments before running anything, and the client checks every reply, so a forged or garbled line
is one ``SchemaError`` line, never a ``KeyError`` deep in a page. Progress events carry a ``type``
tag that selects their record (``EVENT_TYPES``).

Who owns which record: this module the envelope and the device's messages; each capability its
own (``dashboard.partition.protocol``, ``dashboard.timeline.protocol``), registered here with
``register_command`` and ``register_events`` when its module is imported. Why the records are
split by owner: a record of partitions is built from partition and timeline types (reports,
options, tensor shapes), which sit above the runtime and import numpy; kept here they made the
runtime import its own callers (a cycle) and made reading a probe reply import numpy and onnx.
This module imports only ``dashboard.serde``.

Why capabilities are named here at all (``CAPABILITY_PROTOCOLS``, module names as data): a worker
must answer ``partition`` and ``timeline`` requests, and a client may decode their replies and
events, before anything imported the capability. A name the registries do not know yet imports
those modules once (``importlib``) and looks again, so the runtime never imports a capability at
module level, a worker only imports what a request needs, and a record is defined once, by its
owner.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal, NamedTuple

from dashboard.serde import Record, SchemaError, load

PROTOCOL_VERSION = 3  # 3: the greeting names the package version; ort_view writes into the client's folder
DIGEST = re.compile(r"[0-9a-f]{32}")  # dashboard.intake.digest.file_digest: blake2b, 16 bytes, hex
MAX_LINE = 64 << 20
"""The longest protocol line either end reads (bytes). Why a cap: a line is read whole before it
is parsed, so without one a broken or hostile worker that writes 300 MB without a newline made the
client hold all of it (908 MB RSS). Every legitimate line is far smaller: model chunks are 4 MB of
data (5.6 MB as base64) and the largest result, a partition analysis of both backends, is about
600 bytes per node (measured: 1.8 MB for a 3,000-node decoder, so 12 MB for 20,000 nodes). A
worker whose result would exceed the cap answers with an error instead; a line over the cap
stops the worker."""


def read_line(stream: BinaryIO) -> bytes | None:
    """One protocol line read whole but never more than ``MAX_LINE`` bytes of it, as both ends read
    them: ``b""`` when the stream ends or fails, ``None`` when the line is longer than the cap (its
    first ``MAX_LINE`` bytes are consumed; the caller decides whether to skip the rest or stop)."""
    try:
        raw = stream.readline(MAX_LINE + 1)
    except (OSError, ValueError):
        return b""
    if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
        return None
    return raw


_FILE_NAME = re.compile(r"[^/\\:\x00-\x1f]{1,255}")
_NOT_IN_NAMES = re.compile(r"[/\\:\x00-\x1f]")
_WINDOWS_DEVICES = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?", re.IGNORECASE)


def check_file_name(name: str) -> None:
    """A model's file name in the worker's store: one plain name on either platform, so it cannot
    leave its digest folder or name a device (no separators, no drive colon, not ``.``/``..``, no
    control characters, no Windows device name such as ``NUL``, no trailing dot or space)."""
    if (not _FILE_NAME.fullmatch(name) or name in (".", "..") or name.endswith((".part", ".", " "))
            or _WINDOWS_DEVICES.fullmatch(name)):
        raise SchemaError(f"bad model file name {name[:60]!r} (one plain file name: no '/', '\\', ':' or "
                          "control characters, not '.', '..', a device name or '*.part')")


def plain_file_name(name: str) -> str:
    """``name`` made acceptable to ``check_file_name`` (what the client sends for a model)."""
    clean = _NOT_IN_NAMES.sub("_", name)[:255]
    try:
        check_file_name(clean)
    except SchemaError:
        return "model.onnx"
    return clean


def check_digest(digest: str) -> None:
    """A model digest names a folder of the worker's model store: anything but the exact hex form
    (``../../etc/ssh``) is refused before it reaches a path."""
    if not DIGEST.fullmatch(digest):
        raise SchemaError(f"bad model digest {digest[:40]!r} (32 lowercase hex digits)")


# -- the envelope ---------------------------------------------------------------------------------
@dataclass
class WorkerHello(Record):
    """The worker's first line. ``protocol`` is what the client checks (a mismatch is refused
    with both versions named); ``version`` is the package version, for that message."""

    protocol: int
    pid: int
    version: str = "unknown"


@dataclass
class WorkerRequest(Record):
    id: int
    cmd: str
    args: dict = field(default_factory=dict)


@dataclass
class WorkerReply(Record):
    id: int | None
    ok: bool
    result: Any = None
    error: str | None = None
    kind: Literal["user", "internal"] | None = None


@dataclass
class WorkerProgress(Record):
    id: int
    event: dict


# -- the registries ---------------------------------------------------------------------------------
CAPABILITY_PROTOCOLS = ("dashboard.partition.protocol", "dashboard.timeline.protocol", "dashboard.profile.protocol",
                        "dashboard.accuracy.protocol")
"""The modules that register the commands and events of the capabilities above the runtime."""


HEAD_STARTS = {"partition": "dashboard.partition.session:head_start"}
"""Per command, a context manager a worker enters with the request's raw arguments before it
decodes them (the capability's records and handler are imported then) and leaves when the request
is answered: what the command can start as soon as the runtime is loaded, it starts there."""


class Command(NamedTuple):
    args: type
    result: type | None  # None: the command never answers (it dies, on purpose)
    handler: str  # "module:function", imported only by a worker that runs the command


class _Registry(dict):
    """A name's record, and on a name not registered yet the capability modules imported in
    order (``CAPABILITY_PROTOCOLS``, each at most once) until one has registered it, so
    ``COMMANDS[name]`` and ``EVENT_TYPES[tag]`` find every capability's entries whatever was
    imported before. A miss (all imported) is a ``KeyError``. Why not all at once: a worker
    decodes its first request while it imports the runtime, and the other capabilities' records
    (about 30 ms of imports) would delay a first ``partition``'s session by as much."""

    def __missing__(self, key: str) -> Any:
        for module in CAPABILITY_PROTOCOLS:
            importlib.import_module(module)
            if dict.__contains__(self, key):
                return dict.__getitem__(self, key)
        raise KeyError(key)


COMMANDS: dict[str, Command] = _Registry()
EVENT_TYPES: dict[str, type] = _Registry()

ProgressEvent = Record
"""Any registered progress event (``EVENT_TYPES``); each record names its kind in ``type``."""


def register_command(name: str, command: Command) -> None:
    """Make ``name`` a command of the protocol (its owner calls this when its module is imported)."""
    _register(COMMANDS, name, command, command.args)


def register_events(*records: type) -> None:
    """Make each record a progress event, selected by its ``type`` tag."""
    for record in records:
        _register(EVENT_TYPES, record.type, record, record)


def _register(registry: dict, key: str, value: Any, owner: type) -> None:
    """One definition per name: a second owner of a name is a bug, found at import time (the same
    record defined again, as by ``importlib.reload``, replaces the first)."""
    known = dict.get(registry, key)
    if known is not None:
        before = known.args if isinstance(known, Command) else known
        if (before.__module__, before.__qualname__) != (owner.__module__, owner.__qualname__):
            raise ValueError(f"protocol name {key!r} is registered by {before.__module__} and {owner.__module__}")
    registry[key] = value


def event_from_json(data: Any) -> ProgressEvent:
    """The progress event ``data`` encodes (its ``type`` picks the record)."""
    kind = data.get("type") if isinstance(data, dict) else None
    try:
        record = EVENT_TYPES[kind] if isinstance(kind, str) else None
    except KeyError:
        record = None
    if record is None:
        raise SchemaError(f"progress event of unknown type {kind!r}")
    return load(record, data, f"event {kind}")


# -- device events -------------------------------------------------------------------------------
@dataclass
class Upload(Record):
    """Model bytes sent to a remote worker so far."""

    sent: int
    total: int
    type: Literal["upload"] = "upload"


@dataclass
class Probing(Record):
    backend: str
    type: Literal["probing"] = "probing"


# -- device commands -----------------------------------------------------------------------------
@dataclass
class NoArgs(Record):
    pass


@dataclass
class HostInfo(Record):
    hostname: str
    os: str
    arch: str
    python: str
    onnxruntime: str
    onnxruntime_qnn: str
    qnn_sdk: str
    protocol: int = PROTOCOL_VERSION


@dataclass
class ProbeArgs(Record):
    backends: list[Literal["htp", "gpu", "cpu"]] = field(default_factory=lambda: ["htp", "gpu", "cpu"])


@dataclass
class BackendProbe(Record):
    ok: bool
    error: str | None
    seconds: float


@dataclass
class SharedMemoryProbe(Record):
    ok: bool
    reason: str | None


@dataclass
class ProbeResult(HostInfo):
    backends: dict[str, BackendProbe] = field(default_factory=dict)
    soc: dict = field(default_factory=dict)
    shared_memory: SharedMemoryProbe | None = None


@dataclass
class DoctorCheck(Record):
    """One reason a backend may not initialize on a host, checked: what was looked at (``title``),
    what was found (``detail``, a short phrase that also ends up in backend failure messages), and
    a one-line ``fix`` when it fails. ``backends`` are the backends the check gates."""

    name: str
    title: str
    status: Literal["pass", "fail", "warn", "skip", "info"]
    detail: str
    fix: str | None = None
    backends: list[Literal["htp", "gpu", "cpu"]] = field(default_factory=list)


@dataclass
class DoctorReport(Record):
    """The device doctor's checks on one host (``dashboard.runtime.doctor``). ``mode``: ``device``
    (a Snapdragon, real HTP/GPU), ``simulator`` (x86_64: QNN's HTP simulator) or ``unsupported``
    (no onnxruntime-qnn wheel for this platform)."""

    mode: Literal["device", "simulator", "unsupported"]
    platform: str
    summary: str
    checks: list[DoctorCheck]


@dataclass
class DigestArgs(Record):
    digest: str

    def __post_init__(self) -> None:
        check_digest(self.digest)


@dataclass
class ModelChunk(Record):
    """Part of a model sent to a remote worker (base64 ``data`` at byte ``offset``)."""

    digest: str
    name: str
    offset: int
    data: str
    final: bool

    def __post_init__(self) -> None:
        check_digest(self.digest)
        check_file_name(self.name)
        if self.offset < 0:
            raise SchemaError(f"bad chunk offset {self.offset}")


@dataclass
class ChunkReceived(Record):
    received: int | None = None  # bytes so far, until the final chunk
    path: str | None = None  # where the model is, after the final chunk


@dataclass
class ModelLocation(Record):
    path: str | None


@dataclass
class CrashArgs(Record):
    signal: str = "SIGSEGV"


@dataclass
class OrtViewArgs(Record):
    """``out_dir``: an existing folder of the client's (it removes it, whatever happens here)."""

    path: str
    out_dir: str
    level: Literal["basic", "extended", "all"] = "basic"


register_events(Upload, Probing)
register_command("hello", Command(NoArgs, HostInfo, "dashboard.runtime.worker:hello"))
register_command("probe", Command(ProbeArgs, ProbeResult, "dashboard.runtime.worker:probe"))
register_command("doctor", Command(NoArgs, DoctorReport, "dashboard.runtime.doctor:run"))
register_command("put_model", Command(ModelChunk, ChunkReceived, "dashboard.runtime.worker:put_model"))
register_command("has_model", Command(DigestArgs, ModelLocation, "dashboard.runtime.worker:has_model"))
register_command("crash", Command(CrashArgs, None, "dashboard.runtime.worker:crash"))
register_command("ort_view", Command(OrtViewArgs, ModelLocation, "dashboard.runtime.worker:ort_view"))
