"""A copy-paste Python script that runs a timeline's hot migration outside the dashboard.

Why: a model engineer who saw the migration serve on the CPU and swap to the HTP wants the same
thing in their own service, or to show it to the EP's developers. The script carries the run's
exact sessions: the fast session as the runner builds it (``SessionConfig.of(..., qnn=False)``: the
dimensions and optimisation level; the QNN GPU's ``backend_type`` when the fast backend is the
GPU), the target session with every provider option ``SessionConfig.qnn_options`` gives the worker
(backend, SoC, fp16, the user's extra options), the free-dimension overrides and whole input
shapes, and the workload (requests, rate, requests after the swap, warm-up runs). It serves on the
fast session at once, compiles and warms the target on a thread, swaps, and prints each request's
backend and latency. What the runner adds only to draw its charts (QNN profiling into a scratch
file) is left out.

Every value from the user or the model enters the script as a Python literal (``repr``).
"""

from __future__ import annotations

from pathlib import Path

from dashboard.partition.snippet import EXTERNAL_DATA_FOLDER, LEVELS, QNN_EP, declared_shapes_copy
from dashboard.runtime.config import SessionConfig
from dashboard.timeline.model import TimelineOptions

_FEEDS = '''
TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
         "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
         "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def feeds(session):
    """Random inputs of the declared shapes (symbolic dimensions as FREE_DIMENSIONS fixes them)."""
    rng = np.random.default_rng(0)
    out = {}
    for spec in session.get_inputs():
        shape = [d if isinstance(d, int) else FREE_DIMENSIONS.get(d, 1) for d in spec.shape]
        dtype = TYPES.get(spec.type, np.float32)
        out[spec.name] = (rng.random(shape).astype(dtype) if np.issubdtype(dtype, np.floating)
                          else np.zeros(shape, dtype))
    return out
'''

_SERVE = '''
fast = ort.InferenceSession(source, sess_options=session_options(FAST_PROVIDER_OPTIONS))
inputs = feeds(fast)
serving = {"session": fast, "backend": FAST_BACKEND, "swapped_at": None}
lock = threading.Lock()
start = time.perf_counter()


def migrate():
    """Create and warm the target on this thread, then swap it in for the next request."""
    try:
        target = ort.InferenceSession(source, sess_options=session_options(TARGET_PROVIDER_OPTIONS))
        for _ in range(WARMUP_RUNS):
            target.run(None, inputs)
    except Exception as exc:  # serving simply continues on the fast session
        print(f"migration failed, still serving on {FAST_BACKEND}: {exc}")
        with lock:
            serving["swapped_at"] = "failed"
        return
    with lock:
        serving.update(session=target, backend=TARGET_BACKEND, swapped_at=time.perf_counter() - start)
    print(f"swap to {TARGET_BACKEND} at {serving['swapped_at']:.3f} s")


threading.Thread(target=migrate, daemon=True).start()
after = 0
for i in range(REQUESTS):
    time.sleep(max(i / RATE - (time.perf_counter() - start), 0))
    with lock:
        session, backend, settled = serving["session"], serving["backend"], serving["swapped_at"] is not None
    if AFTER_SWAP and settled:
        if after >= AFTER_SWAP:
            break
        after += 1
    began = time.perf_counter()
    session.run(None, inputs)
    print(f"request {i}: {backend} {(time.perf_counter() - began) * 1000:.1f} ms")
'''


def timeline_snippet(model: str, options: TimelineOptions, dims: dict[str, int], fast: str = "cpu") -> str:
    """The script for ``options`` on ``model`` (``dims``: every symbolic dimension as resolved;
    ``fast``: the backend that serves first, ``cpu`` where the run found no QNN GPU). Raises
    ``UserError`` for settings no session can be built from (fp16 without a SoC model)."""
    target = SessionConfig.of(options, options.target, dims=dims)
    fast_config = SessionConfig.of(options, fast, dims=dims, qnn=False)
    fast_options = fast_config.qnn_options() if fast != "cpu" else None
    lines = ["# Reproduces the QNN Backend Lab timeline's hot migration: the same sessions, options and workload.",
             "# pip install onnxruntime-qnn numpy" + (" onnx" if options.shapes else ""),
             "import threading",
             "import time",
             *(["import os", "import onnx"] if options.shapes else []),
             "",
             "import numpy as np",
             "import onnxruntime as ort",
             "import onnxruntime_qnn",
             "",
             f"MODEL = {model!r}",
             f"FAST_BACKEND = {fast!r}",
             f"TARGET_BACKEND = {options.target!r}",
             f"FAST_PROVIDER_OPTIONS = {fast_options!r}  # None: the CPU EP",
             f"TARGET_PROVIDER_OPTIONS = {target.qnn_options()!r}",
             f"FREE_DIMENSIONS = {dict(target.dims)!r}",
             *([f"INPUT_SHAPES = {({k: list(v) for k, v in options.shapes.items()})!r}"] if options.shapes else []),
             f"REQUESTS, RATE, AFTER_SWAP, WARMUP_RUNS = {options.requests!r}, {options.rate!r}, "
             f"{options.after_swap!r}, {options.warmup_runs!r}",
             "",
             f"ort.register_execution_provider_library({QNN_EP!r}, onnxruntime_qnn.get_library_path())",
             f"devices = [d for d in ort.get_ep_devices() if d.ep_name == {QNN_EP!r}]",
             "",
             "",
             "def session_options(provider_options):",
             "    options = ort.SessionOptions()",
             f"    options.graph_optimization_level = ort.GraphOptimizationLevel.{LEVELS[target.optimization_level]}",
             "    for name, value in FREE_DIMENSIONS.items():",
             "        options.add_free_dimension_override_by_name(name, value)",
             *_external_folder(options),
             "    if provider_options is not None:",
             "        options.add_provider_for_devices(devices, provider_options)",
             "    return options",
             "",
             *_source(options),
             _FEEDS.rstrip("\n"),
             _SERVE.rstrip("\n")]
    return "\n".join(lines) + "\n"


def _external_folder(options: TimelineOptions) -> list[str]:
    if not options.shapes:
        return []
    return [f"    options.add_session_config_entry({EXTERNAL_DATA_FOLDER!r}, os.path.dirname(os.path.abspath(MODEL)))"]


def _source(options: TimelineOptions) -> list[str]:
    """The model every session reads: the file, or a copy declaring the whole input shapes."""
    if not options.shapes:
        return ["source = MODEL"]
    return [*declared_shapes_copy(), "source = model.SerializeToString()"]


def model_timeline_snippet(model_path: str, options: TimelineOptions, fast: str | None = None) -> str:
    """``timeline_snippet`` of a model file: its dimensions resolved as a run resolves them, its
    path made absolute; ``fast`` None is the CPU EP (the fast backend where no QNN GPU is known)."""
    from dashboard.intake.reader import load_model
    from dashboard.intake.shapes import check_input_shapes, resolve_dims

    given = Path(model_path).expanduser()
    graph = load_model(given)
    dims = resolve_dims(graph, options.dims)
    check_input_shapes(graph, options.shapes, dims)
    return timeline_snippet(str(given.resolve()), options, dims, fast or options.fast or "cpu")
