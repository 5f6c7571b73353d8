"""Accuracy and quantization (issue 25): does the HTP still give the right answer on the user's
data, in which form of the model, which layer breaks it, and what a quantized model costs.

``model`` is the record (``AccuracyReport``: comparisons, per-output and per-sample metrics, the
layers; tables ``frame``, ``sample_frame``, ``layer_frame``); ``run.accuracy_model`` the one entry
point (checks the input, runs the ``accuracy`` worker command); ``measure`` runs the sessions in the
worker; ``probes`` builds the debug copies (cumulative, layerwise); ``metrics`` the figures (SQNR as
Qualcomm's tools and ``qdq_loss_debug`` compute it); ``explain`` why a layer's error jumps;
``data``/``preprocess`` read the user's samples; ``quantize`` builds the QDQ model with ORT's QNN
config and searches the fewest tensors to lift to 16 bits.
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "AccuracyReport": "model", "accuracy_model": "run", "quantize_model": "quantize", "load_data": "data",
    "Preprocess": "preprocess",
})
__all__ = __dir__()
