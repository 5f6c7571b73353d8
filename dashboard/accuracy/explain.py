"""Why a layer's error is what it is, where the model itself can tell: which tensor breaks first,
and the usual causes of a quantized layer's error (the figures QAIRT's accuracy debugger and
``qdq_loss_debug`` show, turned into a sentence).

- *clipped*: reference values outside the range the scale and zero point cover (calibration saw a
  narrower range than this data: the outliers are cut);
- *outlier range*: the range covers the values' spread many times over (a few large values stretched
  it), so the typical value falls on a few of the quantizer's steps;
- *8-bit after a Softmax*: probabilities are mostly tiny and a u8 step is 1/255: most round to 0;
- *beyond fp16*: a float tensor whose values exceed fp16's largest (65504) on an fp16 HTP.
"""

from __future__ import annotations

import statistics

import numpy as np

from dashboard.accuracy.model import FINE_DB, JUMP_DB, LayerError, Layers, Quant

FP16_MAX = 65504.0
SENTINEL = 1e30  # measure.SENTINEL: a mask value, not a signal
CLIPPED = 0.001  # a share of clipped values worth saying (one in a thousand)
STEPS_PER_STD = 8  # fewer quantizer steps than this across one standard deviation is coarse


def quant_params(model) -> dict[str, Quant]:
    """The float tensor each activation QuantizeLinear reads -> its quantization (per-tensor scale
    and zero point read from the initializers; per-channel activations are not made by ORT's QNN
    config and are left out)."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in inits or len(node.input) < 3:
            continue
        scale, zero = inits.get(node.input[1]), inits.get(node.input[2])
        if scale is None or zero is None:
            continue
        s, z = numpy_helper.to_array(scale), numpy_helper.to_array(zero)
        if s.size != 1 or z.size != 1:
            continue
        info = np.iinfo(z.dtype)
        s, z0 = float(s.reshape(-1)[0]), int(z.reshape(-1)[0])
        out[node.input[0]] = Quant(dtype=str(z.dtype), scale=s, zero_point=z0,
                                   low=(info.min - z0) * s, high=(info.max - z0) * s)
    return out


def causes(row: LayerError, fp16: bool) -> list[str]:
    why = []
    q = row.quant
    if q is not None:
        bits = np.iinfo(np.dtype(q.dtype)).bits
        if row.clipped is not None and row.clipped >= CLIPPED:
            why.append(f"{row.clipped:.1%} of the float values fall outside the {q.dtype} range "
                       f"[{q.low:.4g}, {q.high:.4g}] (clipped: calibration saw a narrower range)")
        if row.ref_std and q.scale > 0 and row.ref_std / q.scale < STEPS_PER_STD:
            why.append(f"the {q.dtype} range [{q.low:.4g}, {q.high:.4g}] spans {(q.high - q.low) / row.ref_std:.0f}x the "
                       f"values' spread (std {row.ref_std:.3g}): a typical value falls on "
                       f"{row.ref_std / q.scale:.1f} step(s) (an outlier stretches the range; 16-bit or a "
                       "range override helps)")
        if row.op_type == "Softmax" and bits <= 8:
            why.append("an 8-bit activation after a Softmax: small probabilities round to 0 (16-bit activations "
                       "are the usual fix)")
    elif fp16 and row.ref_low is not None and max(abs(row.ref_low), abs(row.ref_high)) > FP16_MAX:
        top = max(abs(row.ref_low), abs(row.ref_high))
        if top > SENTINEL:
            why.append(f"holds mask values (up to {top:.4g}, e.g. an attention mask's finfo.min): fp16 saturates them "
                       f"at ±{FP16_MAX:g}, harmless before a Softmax; they are left out of its SQNR")
        else:
            why.append(f"values up to {top:.4g}, beyond fp16's largest ({FP16_MAX:g}): they saturate on the HTP")
    return why


def explain_layers(layers: Layers, upstream: dict[str, list[str]], fp16: bool = True) -> None:
    """Fill ``why``, ``worst`` and ``first_jump``. A layer *jumps* when its own error (layerwise,
    else the cumulative error compared with its inputs') is ``JUMP_DB`` worse than the layers'
    typical own error (the median) and below ``FINE_DB``; the first such layer in graph order is named."""
    for row in layers.rows:
        row.why = "; ".join(causes(row, fp16)) or None
    own = {r.tensor: r.layerwise for r in layers.rows if r.layerwise is not None}
    if not own:
        own = _cumulative_drops(layers.rows, upstream)
    if not own:
        return
    layers.worst = min(own, key=own.get)
    typical = statistics.median(own.values())
    layers.first_jump = next((r.tensor for r in layers.rows if r.tensor in own
                             and own[r.tensor] < min(typical - JUMP_DB, FINE_DB)),
                             None)


def _cumulative_drops(rows: list[LayerError], upstream: dict[str, list[str]]) -> dict[str, float]:
    """Without the layerwise mode, a layer's own error is estimated as its cumulative SQNR less the
    drop its inputs already had (relative to the best input: noise adds, so the worst input bounds
    what the layer inherited)."""
    cumulative = {r.tensor: r.cumulative for r in rows if r.cumulative is not None}
    top = max(cumulative.values(), default=None)
    out = {}
    for tensor, value in cumulative.items():
        inputs = [cumulative[t] for t in upstream.get(tensor, []) if t in cumulative]
        inherited = min(inputs) if inputs else top
        out[tensor] = top - (inherited - value) if top is not None and inherited is not None else value
    return out
