"""The one module that talks to ``onnxruntime_qnn``.

Everything QNN-specific goes through here: registering the plugin EP, building session options
from a ``SessionConfig`` (the knobs that decide what QNN claims), creating sessions, capturing the
runtime's native error messages, and probing which backends initialize on this host. It is
imported by the worker process only (``dashboard.worker``), never by the dashboard process, so a
native crash in QNN cannot take the UI down.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Iterator

import numpy as np
import onnxruntime as ort

from .errors import UserError
from .socs import resolve_soc

QNN_EP = "QNNExecutionProvider"
CPU_EP = "CPUExecutionProvider"
BACKENDS = ("htp", "gpu", "cpu")  # "cpu" = ONNX Runtime's own CPU EP, not a QNN backend

_OPT_LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@dataclass
class SessionConfig:
    """Everything that decides how a session is built. JSON-serialisable (it crosses the worker
    protocol and keys the result cache)."""

    backend: str = "htp"
    dims: dict[str, int] = field(default_factory=dict)
    fp16: bool = False
    soc: str | None = None
    provider_options: dict[str, str] = field(default_factory=dict)
    session_config: dict[str, str] = field(default_factory=dict)
    optimization_level: str = "all"
    intra_op_threads: int = 0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.optimization_level not in _OPT_LEVELS:
            raise UserError(f"unknown optimization level {self.optimization_level!r}")
        for name, value in self.dims.items():
            if not isinstance(value, int) or value <= 0:
                raise UserError(f"dimension {name!r} must be a positive integer, got {value!r}")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "SessionConfig":
        return cls(**data)

    def qnn_options(self) -> dict[str, str]:
        """Provider options for the QNN EP (fp16 needs a soc_model, so the SoC is resolved here)."""
        options: dict[str, str] = {"backend_type": self.backend}
        if self.soc:
            soc = resolve_soc(self.soc)
            options["soc_model"] = str(soc.soc_model)
            options["htp_arch"] = str(soc.htp_arch)
        if self.fp16:
            if "soc_model" not in options:
                raise UserError("HTP fp16 precision needs a SoC (the runtime refuses "
                                "enable_htp_fp16_precision without soc_model): pick one with --soc")
            options["enable_htp_fp16_precision"] = "1"
        options.update({k: str(v) for k, v in self.provider_options.items()})
        return options


@lru_cache(maxsize=1)
def register() -> tuple:
    """Register the QNN plugin EP once per process; return its EP devices."""
    import onnxruntime_qnn

    ort.set_default_logger_severity(3)
    try:
        ort.register_execution_provider_library(QNN_EP, onnxruntime_qnn.get_library_path())
    except Exception as exc:  # already registered in this process is fine
        if "already" not in str(exc).lower():
            raise UserError(f"cannot register the QNN EP library: {exc}") from None
    devices = tuple(d for d in ort.get_ep_devices() if d.ep_name == QNN_EP)
    if not devices:
        raise UserError("the QNN EP registered but exposes no devices on this host")
    return devices


def versions() -> dict[str, str]:
    """onnxruntime, onnxruntime-qnn and QNN SDK versions of this host's runtime."""
    try:
        import onnxruntime_qnn
        from onnxruntime_qnn import build_and_package_info as info

        qnn = {"onnxruntime_qnn": onnxruntime_qnn.__version__, "qnn_sdk": getattr(info, "qnn_version", "unknown")}
    except ImportError:
        qnn = {"onnxruntime_qnn": "not installed", "qnn_sdk": "unknown"}
    return {"onnxruntime": ort.__version__, **qnn}


def host_info() -> dict:
    """What a device page shows about this host (cheap: no session is created)."""
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "python": platform.python_version(),
        **versions(),
    }


def session_options(config: SessionConfig) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = _OPT_LEVELS[config.optimization_level]
    if config.intra_op_threads:
        options.intra_op_num_threads = config.intra_op_threads
    for name, value in config.dims.items():
        options.add_free_dimension_override_by_name(name, int(value))
    for key, value in config.session_config.items():
        options.add_session_config_entry(key, str(value))
    if config.backend != "cpu":
        options.add_provider_for_devices(list(register()), config.qnn_options())
    return options


_NATIVE_ERROR = re.compile(r"\[E:onnxruntime:[^\]]*\]\s*(?:\x1b\[m)?(.*?)(?:\x1b\[m)?$")


@contextmanager
def captured_native_log() -> Iterator[list[str]]:
    """Capture what native code writes to fd 2 (ONNX Runtime's and QNN's logger) while the block
    runs; the list is filled with the error lines when the block exits. The text is also passed
    through to the real stderr so nothing is hidden from a terminal."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace")
            os.write(2, text.encode())
            for raw in text.splitlines():
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
        for subgraph in self.session.get_provider_graph_assignment_info():
            out.setdefault(subgraph.ep_name, []).extend((n.name, n.op_type) for n in subgraph.get_nodes())
        return out


def first_error(errors: list[str], fallback: str) -> str:
    """The most telling native error line (QNN's own message), or ``fallback``."""
    for line in errors:
        if "QNN" in line or "qnn" in line:
            return line
    return errors[0] if errors else fallback


def create_session(model: str | bytes, config: SessionConfig) -> SessionHandle:
    """Create a session; raise ``UserError`` with the runtime's own message if it fails."""
    options = session_options(config)
    providers = None if config.backend != "cpu" else [CPU_EP]
    start = time.perf_counter()
    with captured_native_log() as errors:
        try:
            session = ort.InferenceSession(model, sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises several pybind types; all mean "failed"
            message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            failure = exc
    elapsed = time.perf_counter() - start
    if "session" not in locals():
        detail = first_error(errors, _short(message))
        raise UserError(f"session creation failed on {config.backend}: {detail}") from failure
    return SessionHandle(session, config, elapsed, errors)


def _short(message: str) -> str:
    """ORT prefixes messages with source locations; keep the part a user can act on."""
    return message.rsplit(" : ", 1)[-1].strip() if " : " in message else message


_NP_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(int16)": np.int16, "tensor(uint16)": np.uint16,
    "tensor(bool)": np.bool_,
}


def random_inputs(session: ort.InferenceSession, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs matching the session's input specs; symbolic dims take ``dims`` (default 1).
    Integer inputs get small non-negative values, so token ids and masks stay in range."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in session.get_inputs():
        dtype = _NP_TYPES.get(spec.type)
        if dtype is None:
            raise UserError(f"input {spec.name!r} has type {spec.type}, which cannot be generated; supply inputs")
        shape = [d if isinstance(d, int) and d >= 0 else dims.get(str(d), 1) for d in spec.shape]
        if np.issubdtype(dtype, np.floating):
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype is np.bool_:
            feeds[spec.name] = np.ones(shape, dtype=dtype)
        else:
            feeds[spec.name] = rng.integers(0, 2, size=shape).astype(dtype)
    return feeds


@dataclass
class ProbeResult:
    backend: str
    ok: bool
    error: str | None
    seconds: float


def probe_model_bytes() -> bytes:
    """A two-node float model every QNN backend supports (Add, Relu), fixed shapes."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    nodes = [helper.make_node("Add", ["x", "x"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "probe", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()


def probe_backend(backend: str) -> ProbeResult:
    """Does ``backend`` initialize and claim nodes here? A session that "succeeds" while the
    backend failed to set up silently falls back to CPU, so success means QNN claimed the nodes."""
    config = SessionConfig(backend=backend, session_config={"session.record_ep_graph_assignment_info": "1"})
    start = time.perf_counter()
    try:
        handle = create_session(probe_model_bytes(), config)
    except UserError as exc:
        return ProbeResult(backend, False, str(exc), time.perf_counter() - start)
    claimed = handle.assigned_nodes().get(QNN_EP) if backend != "cpu" else [("all", "")]
    if not claimed:
        reason = first_error(handle.native_errors, "the QNN EP claimed no node of a trivial model")
        return ProbeResult(backend, False, reason, time.perf_counter() - start)
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


def optimized_model(model_path: str, out_path: str, level: str = "basic") -> str:
    """Save the graph as ONNX Runtime hands it to execution providers.

    ORT applies its EP-independent level-1 optimizations (constant folding, Conv+BatchNorm fusion,
    Identity/Dropout elimination ...) *before* partitioning, so an EP's ``GetCapability`` — and the
    proposed ``backend_type=auto`` classifier inside it — sees that graph, not the file. A CPU-EP
    session at ``basic`` level writes the same level-1 result to ``out_path``.
    """
    config = SessionConfig(backend="cpu", optimization_level=level, session_config={
        # Weights go to a side file: the graph is what matters, and >2 GB models stay writable.
        "session.optimized_model_external_initializers_file_name": os.path.basename(out_path) + ".data",
        "session.optimized_model_external_initializers_min_size_in_bytes": "1024",
    })
    options = session_options(config)
    options.optimized_model_filepath = out_path
    failure = None
    with captured_native_log() as errors:
        try:
            ort.InferenceSession(model_path, sess_options=options, providers=[CPU_EP])
        except Exception as exc:  # any ORT failure means the model cannot be optimized here
            failure = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    if failure is not None:
        raise UserError(f"onnxruntime could not load the model: {first_error(errors, _short(failure))}")
    return out_path
