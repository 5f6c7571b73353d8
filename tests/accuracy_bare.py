"""The bare script the accuracy benchmark compares with: one process that registers the QNN EP,
creates the same two sessions (the float model on the CPU EP in fp32, and on the HTP in fp16 for
``soc_model``), runs every sample of an .npz through both and computes each output's SQNR with
numpy, printing nothing but the figure.

    python tests/accuracy_bare.py MODEL DATA.npz SOC_MODEL
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
import onnxruntime_qnn


def main(model: str, data: str, soc_model: str) -> None:
    ort.set_default_logger_severity(3)
    ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    options = ort.SessionOptions()
    options.add_provider_for_devices(devices, {"backend_type": "htp", "soc_model": soc_model,
                                               "enable_htp_fp16_precision": "1"})
    htp = ort.InferenceSession(model, sess_options=options)
    cpu = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    arrays = np.load(data)
    names = [i.name for i in cpu.get_inputs()]
    count = len(arrays[names[0]])
    got, want = [], []
    for index in range(count):
        feeds = {n: arrays[n][index] for n in names}
        got.append(htp.run(None, feeds)[0])
        want.append(cpu.run(None, feeds)[0])
    a, b = np.concatenate([g.ravel() for g in got]), np.concatenate([w.ravel() for w in want])
    print(20 * np.log10(np.linalg.norm(b) / max(np.linalg.norm(a - b), 1e-12)))


if __name__ == "__main__":
    main(*sys.argv[1:4])
