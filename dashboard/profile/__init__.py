"""Profile: what each node costs on each backend (issue 18).

``model`` is the record (the JSON contract every surface reads); ``measure`` runs the profiled
sessions in the worker and ``parse`` reads QNN's profiling CSV and ONNX Runtime's trace back onto the
model's nodes; ``aihub`` imports a profile downloaded from Qualcomm AI Hub.
"""
