"""The one module that talks to ``onnxruntime_qnn``.

Everything QNN-specific goes through here: registering the plugin EP, building session options
from a ``SessionConfig`` (the knobs that decide what QNN claims), creating sessions, capturing the
runtime's native error messages, and probing which backends initialize on this host. It is
imported by the worker process only (``dashboard.runtime.worker``), never by the dashboard process, so a
native crash in QNN cannot take the UI down.
"""

from __future__ import annotations

import math
import os
import platform
import re
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import numpy as np
import onnxruntime as ort

from dashboard.errors import UserError, one_line
from dashboard.platform import open_twice, read_at
from dashboard.runtime.config import SessionConfig

QNN_EP = "QNNExecutionProvider"
CPU_EP = "CPUExecutionProvider"

_OPT_LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@lru_cache(maxsize=1)
def register() -> tuple:
    """Register the QNN plugin EP once per process; return its EP devices (none where the EP finds
    no hardware, e.g. an aarch64 host without ``/dev/fastrpc-cdsp``: a QNN session then fails in
    ``session_options`` with the doctor's reason, while CPU sessions still work)."""
    import onnxruntime_qnn

    ort.set_default_logger_severity(3)
    try:
        ort.register_execution_provider_library(QNN_EP, onnxruntime_qnn.get_library_path())
    except Exception as exc:  # already registered in this process is fine
        if "already" not in str(exc).lower():
            raise UserError(f"cannot register the QNN EP library: {exc}") from None
    return tuple(d for d in ort.get_ep_devices() if d.ep_name == QNN_EP)


def versions() -> dict[str, str]:
    """onnxruntime, onnxruntime-qnn and QNN SDK versions of this host's runtime."""
    try:
        import onnxruntime_qnn
        from onnxruntime_qnn import build_and_package_info as info

        qnn = {"onnxruntime_qnn": onnxruntime_qnn.__version__, "qnn_sdk": getattr(info, "qnn_version", "unknown")}
    except ImportError:
        qnn = {"onnxruntime_qnn": "not installed", "qnn_sdk": "unknown"}
    return {"onnxruntime": ort.__version__, **qnn}


@lru_cache(maxsize=None)  # the host does not change under a process; the doctor reads installed packages
def hardware(backend: str) -> str:
    """What a backend's figures on this host are measured on: ``"simulator"`` for the HTP on an
    x86_64 host (QNN's HTP simulator: real compilation, emulated execution, far slower than an
    NPU), ``"npu"`` for the HTP on a Snapdragon (aarch64, or x64 Python emulated on Windows on
    Snapdragon, whose wheel loads the arm64ec backends), ``"gpu"`` and ``"cpu"`` for those backends,
    ``"unknown"`` elsewhere. The platform is classified once, by the doctor (``platform_mode``).
    Decided in the worker, on the host that measures, and carried in every result, so no page or
    report can present simulator latency as NPU latency."""
    if backend in ("gpu", "cpu"):
        return backend
    from dashboard.runtime.doctor import platform_mode, this_host

    return {"simulator": "simulator", "device": "npu"}.get(platform_mode(this_host()), "unknown")


def host_info() -> dict:
    """What a device page shows about this host (cheap: no session is created)."""
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "python": platform.python_version(),
        **versions(),
    }


def session_options(config: SessionConfig, profile_prefix: str | None = None) -> ort.SessionOptions:
    """``profile_prefix``: ONNX Runtime's own profiler on, its JSON trace written at
    ``<prefix>_<date>.json`` (a profile's CPU EP nodes; ``session.end_profiling()`` names the file)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    options.graph_optimization_level = _OPT_LEVELS[config.optimization_level]
    if config.intra_op_threads:
        options.intra_op_num_threads = config.intra_op_threads
    for name, value in config.dims.items():
        options.add_free_dimension_override_by_name(name, int(value))
    for key, value in config.session_config.items():
        options.add_session_config_entry(key, str(value))
    if config.backend != "cpu":
        devices = register()
        if not devices:
            raise UserError(f"the QNN EP exposes no devices on this host{doctor_hint(config.backend)}")
        options.add_provider_for_devices(list(devices), config.qnn_options())
    return options


def doctor_hint(backend: str) -> str:
    """The device doctor's reasons ``backend`` cannot initialize here, for a failure message."""
    from dashboard.runtime.doctor import explain

    return explain(backend) if backend != "cpu" else ""


# Where ORT looks for external-data files of a model given as bytes (the partition analysis feeds
# a renamed copy of the model from memory; its weights stay next to the original file).
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"

_NATIVE_ERROR = re.compile(r"\[E:onnxruntime:[^\]]*\]\s*(?:\x1b\[m)?(.*?)(?:\x1b\[m)?$")


class _NativeLogCapture:
    """One redirection of fd 2 shared by every thread that captures at the same time.

    fd 2 is process-wide, so two threads redirecting it independently (sessions built in parallel
    by the partition analysis) would restore each other's descriptors. Instead the first capture
    points fd 2 at a temporary file, later ones join it, each reads the bytes written while it was
    open (through a second descriptor of the file, so native writers' offset never moves), and the
    last one restores fd 2 and passes the text through to the real stderr."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.saved: int | None = None
        self.writer: int | None = None
        self.reader: int | None = None

    def enter(self) -> int:
        with self.lock:
            if self.users == 0:
                sys.stderr.flush()
                self.writer, self.reader = open_twice()
                self.saved = os.dup(2)
                os.dup2(self.writer, 2)
            self.users += 1
            return os.fstat(self.writer).st_size

    def leave(self, start: int) -> str:
        with self.lock:
            sys.stderr.flush()
            end = os.fstat(self.writer).st_size
            text = read_at(self.reader, start, end - start).decode("utf-8", "replace")
            self.users -= 1
            if self.users == 0:
                os.dup2(self.saved, 2)
                os.write(2, read_at(self.reader, 0, end))
                for fd in (self.saved, self.writer, self.reader):
                    os.close(fd)
                self.saved = self.writer = self.reader = None
            return text


_CAPTURE = _NativeLogCapture()


@contextmanager
def captured_native_log() -> Iterator[list[str]]:
    """Capture what native code writes to fd 2 (ONNX Runtime's and QNN's logger) while the block
    runs; the list is filled with the error lines when the block exits. The text is also passed
    through to the real stderr so nothing is hidden from a terminal. Thread-safe: concurrent
    captures share one redirection (a line written by another thread in the same window is seen
    by both)."""
    lines: list[str] = []
    start = _CAPTURE.enter()
    try:
        yield lines
    finally:
        for raw in _CAPTURE.leave(start).splitlines():
            match = _NATIVE_ERROR.search(raw)
            if match:
                lines.append(match.group(1).strip())


@dataclass
class SessionHandle:
    """A created session and what creating it cost and said."""

    session: ort.InferenceSession
    config: SessionConfig
    create_s: float
    native_errors: list[str]

    def assigned_nodes(self) -> dict[str, list[tuple[str, str]]]:
        """EP name -> [(node name, op type)] as the session reports (needs
        ``session.record_ep_graph_assignment_info=1`` in the config)."""
        out: dict[str, list[tuple[str, str]]] = {}
        for ep_name, nodes in self.assignment():
            out.setdefault(ep_name, []).extend(nodes)
        return out

    def assignment(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """One entry per subgraph the session formed: (EP name, [(node name, op type)]). The
        number of QNN entries is the number of QNN subgraphs (needs
        ``session.record_ep_graph_assignment_info=1``)."""
        return [(subgraph.ep_name, [(n.name, n.op_type) for n in subgraph.get_nodes()])
                for subgraph in self.session.get_provider_graph_assignment_info()]


def first_error(errors: list[str], fallback: str) -> str:
    """The most telling native error line (QNN's own message), or ``fallback``."""
    for line in errors:
        if "QNN" in line or "qnn" in line:
            return line
    return errors[0] if errors else fallback


def create_session(model: str | bytes, config: SessionConfig, *, require_qnn: bool = False,
                   profile_prefix: str | None = None) -> SessionHandle:
    """Create a session; raise ``UserError`` with the runtime's own message if it fails.

    When a QNN backend cannot set up (no Adreno, a bad option), ONNX Runtime still creates the
    session and silently runs every node on the CPU EP. ``require_qnn`` turns that into a failure
    carrying QNN's own message: what a caller asking for ``htp`` or ``gpu`` means.
    """
    if require_qnn and config.backend != "cpu":
        record = {"session.record_ep_graph_assignment_info": "1"}
        config = config.replace(session_config={**config.session_config, **record})
    options = session_options(config, profile_prefix)
    providers = None if config.backend != "cpu" else [CPU_EP]
    start = time.perf_counter()
    with captured_native_log() as errors:
        try:
            session = ort.InferenceSession(model, sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises several pybind types; all mean "failed"
            message = one_line(exc)
            failure = exc
    elapsed = time.perf_counter() - start
    if "session" not in locals():
        detail = first_error(errors, _short(message)) + doctor_hint(config.backend)
        raise UserError(f"session creation failed on {config.backend}: {detail}") from failure
    handle = SessionHandle(session, config, elapsed, errors)
    if require_qnn and config.backend != "cpu" and not handle.assigned_nodes().get(QNN_EP):
        detail = first_error(errors, "QNN claimed no node: every node would run on the CPU EP")
        detail += doctor_hint(config.backend)
        raise UserError(f"QNN {config.backend} is not running this model: {detail}")
    return handle


def _short(message: str) -> str:
    """ORT prefixes messages with source locations; keep the part a user can act on."""
    return message.rsplit(" : ", 1)[-1].strip() if " : " in message else message


_NP_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(int16)": np.int16, "tensor(uint16)": np.uint16,
    "tensor(bool)": np.bool_,
}


MAX_GENERATED_BYTES = 1 << 30
"""The most one set of generated inputs may take. Why: the shapes come from the model, and a
declared ``[1, 2**31]`` float input would have the worker allocate 8 GB (twice, while converting)
before anything could fail: the machine would swap or the OOM killer would pick a process."""


def random_inputs(session: ort.InferenceSession, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs matching the session's input specs; symbolic dims take ``dims`` (default 1).
    Integer inputs get small non-negative values, so token ids and masks stay in range. Inputs
    larger than ``MAX_GENERATED_BYTES`` in all are refused before anything is allocated."""
    rng = np.random.default_rng(seed)
    specs = []
    for spec in session.get_inputs():
        dtype = _NP_TYPES.get(spec.type)
        if dtype is None:
            raise UserError(f"input {spec.name!r} has type {spec.type}, which cannot be generated; supply inputs")
        shape = [d if isinstance(d, int) and d >= 0 else dims.get(str(d), 1) for d in spec.shape]
        specs.append((spec.name, dtype, shape, math.prod(shape) * np.dtype(dtype).itemsize))
    total = sum(size for *_, size in specs)
    if total > MAX_GENERATED_BYTES:
        name, _, shape, size = max(specs, key=lambda s: s[3])
        raise UserError(f"generated inputs would take {total / 2**30:.1f} GB (input {name!r} "
                        f"{shape}: {size / 2**30:.1f} GB; at most {MAX_GENERATED_BYTES >> 30} GB): fix its "
                        "dimensions smaller, or supply inputs")
    feeds = {}
    for name, dtype, shape, _ in specs:
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype is np.bool_:
            feeds[name] = np.ones(shape, dtype=dtype)
        else:
            feeds[name] = rng.integers(0, 2, size=shape).astype(dtype)
    return feeds


@dataclass
class ProbeResult:
    backend: str
    ok: bool
    error: str | None
    seconds: float


def probe_model_bytes() -> bytes:
    """A two-node float model every QNN backend supports (Add, Relu), fixed shapes. Built with the
    reader's message classes (``intake.proto``): importing onnx for its helpers costs a second."""
    from dashboard.intake.proto import ModelProto, TensorProto

    model = ModelProto(ir_version=9)
    model.opset_import.add(domain="", version=17)
    graph = model.graph
    graph.name = "probe"
    graph.node.add(op_type="Add", input=["x", "x"], output=["s"], name="add")
    graph.node.add(op_type="Relu", input=["s"], output=["y"], name="relu")
    for value in (graph.input.add(name="x"), graph.output.add(name="y")):
        tensor = value.type.tensor_type
        tensor.elem_type = TensorProto.FLOAT
        for size in (1, 8):
            tensor.shape.dim.add(dim_value=size)
    return model.SerializeToString()


def probe_backend(backend: str) -> ProbeResult:
    """Does ``backend`` initialize and claim nodes here? A session that "succeeds" while the
    backend failed to set up silently falls back to CPU, so success means QNN claimed the nodes."""
    start = time.perf_counter()
    try:
        create_session(probe_model_bytes(), SessionConfig(backend=backend), require_qnn=True)
    except UserError as exc:
        return ProbeResult(backend, False, str(exc), time.perf_counter() - start)
    return ProbeResult(backend, True, None, time.perf_counter() - start)


def shared_memory_status() -> tuple[bool, str | None]:
    """Can the HTP shared-memory allocator (seed 001) be created? It needs the rpcmem library
    (libcdsprpc) of a Snapdragon device."""
    config = SessionConfig(backend="htp", provider_options={"enable_htp_shared_memory_allocator": "1"})
    try:
        create_session(probe_model_bytes(), config)
    except UserError as exc:
        return False, f"{exc} (the allocator needs rpcmem / libcdsprpc, present only on Snapdragon devices)"
    return True, None


def optimized_model(model_path: str | bytes, out_path: str, level: str = "basic",
                    dims: dict[str, int] | None = None, session_config: dict[str, str] | None = None) -> str:
    """Save the graph as ONNX Runtime hands it to execution providers.

    ORT applies its EP-independent level-1 optimizations (constant folding, Conv+BatchNorm fusion,
    Identity/Dropout elimination ...) *before* partitioning, so an EP's ``GetCapability`` — and the
    proposed ``backend_type=auto`` classifier inside it — sees that graph, not the file. A CPU-EP
    session at ``basic`` level writes the same level-1 result to ``out_path``. ``dims`` are the
    free-dimension overrides the real session uses (they decide what constant folding removes);
    ``session_config`` adds entries (e.g. ``EXTERNAL_DATA_FOLDER`` when ``model_path`` is bytes).
    """
    config = SessionConfig(backend="cpu", optimization_level=level, dims=dict(dims or {}), session_config={
        **(session_config or {}),
        # Weights go to a side file: the graph is what matters, and >2 GB models stay writable.
        "session.optimized_model_external_initializers_file_name": os.path.basename(out_path) + ".data",
        "session.optimized_model_external_initializers_min_size_in_bytes": "1024",
    })
    options = session_options(config)
    options.optimized_model_filepath = out_path
    # The session only writes the graph, never runs: no thread pool to start beside the QNN compile.
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    failure = None
    with captured_native_log() as errors:
        try:
            ort.InferenceSession(model_path, sess_options=options, providers=[CPU_EP])
        except Exception as exc:  # any ORT failure means the model cannot be optimized here
            failure = one_line(exc)
    if failure is not None:
        raise UserError(f"onnxruntime could not load the model: {first_error(errors, _short(failure))}")
    return out_path


# -- HTP shared memory (seed 001) and device identity: used by the migration runner (issue 4) --------

# The QNN EP's HTP shared memory, as its factory describes it: CreateMemoryInfo_V2("QnnHtpShared",
# OrtMemoryInfoDeviceType_CPU, vendor 0x5143 (Qualcomm), device 0, OrtDeviceMemoryType_HOST_ACCESSIBLE,
# alignment 0, OrtDeviceAllocator) (onnxruntime-qnn, onnxruntime/core/providers/qnn/qnn_provider_factory.cc).
# Used only where no EP device declares the memory itself; tests/test_runtime.py checks the two agree.
HTP_SHARED_MEMORY = "QnnHtpShared"
QUALCOMM_VENDOR_ID = 0x5143


def shared_memory_info() -> ort.OrtMemoryInfo:
    """The memory of the QNN HTP shared-memory allocator (CPU-visible, HOST_ACCESSIBLE): the one
    a QNN EP device declares (``OrtEpDevice.memory_info``), for which ONNX Runtime keeps an
    environment allocator; where no device declares it (no rpcmem, e.g. the x86_64 simulator) the
    same description, so allocating in it fails with the runtime's own message."""
    for device in register():
        info = device.memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE)
        if info is not None:
            return info
    return ort.OrtMemoryInfo.create_v2(HTP_SHARED_MEMORY, ort.OrtMemoryInfoDeviceType.CPU, QUALCOMM_VENDOR_ID, 0,
                                       ort.OrtDeviceMemoryType.HOST_ACCESSIBLE, 0,
                                       ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)


@lru_cache(maxsize=1)
def cpu_memory_info() -> ort.OrtMemoryInfo:
    """Ordinary CPU memory (the copy path, and what tests bind where there is no rpcmem), with an
    environment allocator registered for it once per process so ``BoundRunner`` can allocate."""
    info = ort.OrtMemoryInfo.create_v2("Cpu", ort.OrtMemoryInfoDeviceType.CPU, 0, 0, ort.OrtDeviceMemoryType.DEFAULT,
                                       0, ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)
    ort.create_and_register_allocator(info, None)
    return info


class BoundRunner:
    """Runs a session through IOBinding with inputs and outputs allocated once in ``memory`` by
    ONNX Runtime's environment allocator for it (for ``shared_memory_info()`` on a device that is
    the QNN EP's HtpSharedMemoryAllocator, so the HTP reads and writes the buffers without a CPU
    copy). Public API only: ``OrtValue.ortvalue_from_shape_and_type(..., memory_info=...)`` and
    the IOBinding methods.

    ``example`` fixes the input shapes and ``outputs`` the outputs' (the first plain run's).
    Raises ``UserError`` with the runtime's message when there is no allocator for ``memory``
    (no rpcmem on this host). One runner per thread: a binding holds fixed buffers.
    """

    def __init__(self, session: ort.InferenceSession, memory: ort.OrtMemoryInfo, example: dict[str, np.ndarray],
                 outputs: list[np.ndarray]) -> None:
        self.session = session
        self.binding = session.io_binding()
        self.inputs: dict[str, ort.OrtValue] = {}
        self.outputs: list[ort.OrtValue] = []
        try:
            for name, array in example.items():
                value = _allocate(array, memory)
                self.binding.bind_ortvalue_input(name, value)
                self.inputs[name] = value
            for meta, array in zip(session.get_outputs(), outputs):
                value = _allocate(array, memory)
                self.binding.bind_ortvalue_output(meta.name, value)
                self.outputs.append(value)
        except Exception as exc:  # ORT raises plain RuntimeError/Fail for a missing allocator
            raise UserError(f"cannot bind inputs/outputs in that memory: {_short(str(exc).strip())}") from None

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Write ``feeds`` into the bound buffers, run, and read the bound outputs."""
        for name, array in feeds.items():
            self.inputs[name].update_inplace(np.ascontiguousarray(array))
        self.session.run_with_iobinding(self.binding)
        return [value.numpy() for value in self.outputs]


def _allocate(like: np.ndarray, memory: ort.OrtMemoryInfo) -> ort.OrtValue:
    """An uninitialised tensor shaped like ``like``, from the environment allocator for ``memory``."""
    return ort.OrtValue.ortvalue_from_shape_and_type(list(like.shape), like.dtype.type, memory_info=memory)


def soc_info() -> dict:
    """What this host says about its Snapdragon part, where it says anything: the kernel's SoC
    identity (Linux/Android ``/sys/devices/soc0``), the QNN EP devices' hardware metadata
    (Windows reports the NPU's description there), and nothing invented where absent."""
    from dashboard.runtime.doctor import soc_facts

    info: dict = soc_facts()
    try:
        devices = register()
    except UserError:
        devices = ()
    info["ep_devices"] = [{
        "type": str(d.device.type).rsplit(".", 1)[-1],
        "vendor": d.device.vendor,
        "vendor_id": d.device.vendor_id,
        "device_id": d.device.device_id,
        "metadata": dict(d.device.metadata),
    } for d in devices]
    return info
