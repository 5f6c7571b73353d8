"""Backend classification: is this model GenAI (QNN GPU) or not (HTP)?

- ``ep_rules``: ``classify_ep``, the rules proposed for ``backend_type=auto``, re-implemented exactly;
- ``refined``: ``classify_refined``, this project's structural classifier;
- ``verdicts``: ``Classification`` and ``Signal``, the JSON contract both return, and
  ``explain_disagreement``;
- ``optimized``: the EP rules on the graph ONNX Runtime hands the EP (after its level-1
  optimizations), given that graph by the caller.

Never imports the runtime: classification reads the graph only.
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "classify_ep": "ep_rules", "classify_refined": "refined",
    "Classification": "verdicts", "Signal": "verdicts", "explain_disagreement": "verdicts",
    "classify_after_ort_optimizations": "optimized",
})
__all__ = __dir__()
