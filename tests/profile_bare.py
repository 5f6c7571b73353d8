"""A bare ONNX Runtime + QNN profiling script: what a model engineer writes by hand, to compare with
``python -m dashboard profile`` (tests/test_profile_measure.py) and to time it (benchmarks/profile_bench.py).

    python tests/profile_bare.py MODEL OUT_DIR RUNS [--fp16 SOC_MODEL] [--dim NAME=VALUE ...]

Registers the QNN EP, creates one HTP session with QNN's detailed profiling (CSV in OUT_DIR, with the framework op trace
that gives its rows their ONNX source column) and
ONNX Runtime's profiler on, runs it once to warm up and RUNS times on random inputs, and prints one
JSON line: the CSV's path, ORT's trace path, and the seconds from session creation to the last run.
Only the public onnxruntime / onnxruntime_qnn API; nothing of the project.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import onnxruntime_qnn

TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
         "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def main(argv: list[str]) -> None:
    model, out, runs = argv[0], Path(argv[1]), int(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    ort.set_default_logger_severity(3)
    ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    options = {"backend_type": "htp", "profiling_level": "detailed", "profiling_file_path": str(out / "bare.csv"),
               "enable_framework_op_trace": "1", "framework_op_trace_dir": str(out)}
    if "--fp16" in argv:
        options.update({"enable_htp_fp16_precision": "1", "soc_model": argv[argv.index("--fp16") + 1]})
    start = time.perf_counter()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.enable_profiling = True
    so.profile_file_prefix = str(out / "bare_ort")
    dims = {}
    for i, arg in enumerate(argv):
        if arg == "--dim":
            name, value = argv[i + 1].split("=")
            dims[name] = int(value)
            so.add_free_dimension_override_by_name(name, int(value))
    so.add_provider_for_devices(devices, options)
    session = ort.InferenceSession(model, sess_options=so)
    rng = np.random.default_rng(0)
    feeds = {}
    for spec in session.get_inputs():
        shape = [d if isinstance(d, int) else dims.get(d, 1) for d in spec.shape]
        dtype = TYPES[spec.type]
        feeds[spec.name] = (rng.standard_normal(shape).astype(dtype) if np.issubdtype(dtype, np.floating)
                            else np.ones(shape, dtype=dtype))
    for _ in range(1 + runs):
        session.run(None, feeds)
    trace = session.end_profiling()
    del session
    print(json.dumps({"csv": str(out / "bare.csv"), "trace": trace, "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main(sys.argv[1:])
