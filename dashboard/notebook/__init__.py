"""The notebook layer: load, classify, partition and time a model from Jupyter (or any Python),
every result a ``pandas`` table (``.to_frame()``) and a ``plotly`` figure (``.figure()``)::

    from dashboard import notebook as lab

    model = lab.load("model.onnx")                # or lab.sample("cnn_classifier.onnx")
    model.classify().to_frame()                   # both classifiers' signals, with evidence
    model.partition(fp16=True).figure()           # the graph coloured by GPU / HTP support
    model.timeline(strategies=["fast", "migrate"], requests=20).figure("gantt")
    model.profile(fp16=True, soc="60").to_frame()  # per-node cost: simulated HTP cycles here, CPU EP µs
    model.accuracy("images/").figure()            # the HTP vs the CPU EP's fp32 on your data, layer by layer
    model.quantize("images/", "model.qdq.onnx", target="30").steps_frame()  # the mixed-precision search

A thin layer over the records the CLI and the pages use (``Classification``, ``PartitionReport``,
``TimelineRun``, each as ``.record``) and the ``dashboard.render`` figures; QNN work runs in a worker
process, as for the dashboard, so a native crash is an exception, never a dead kernel. Importing it
imports neither Streamlit nor onnxruntime.
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "load": "api", "sample": "api", "samples": "api", "Model": "api", "Classified": "api", "Partitioned": "api",
    "Timeline": "api", "Profiled": "api", "Accuracy": "api",
})
__all__ = __dir__()
