"""QNN Backend Lab: model intake, backend classification, partitions and migration timelines
for ONNX models deployed with onnxruntime-qnn.

The package is importable without Streamlit; only the modules under ``dashboard.views`` draw.
"""

__version__ = "0.1.0"
