"""The debug copies of a model that make its intermediate tensors visible, in the two modes of
QAIRT's accuracy debugger.

- *cumulative* (``cumulative_model``): the whole model runs as it is and every probed tensor is also
  a graph output, so a tensor's error is everything upstream of it added up;
- *layerwise* (``layerwise_model``): every probed tensor a node reads is cut and fed from the float
  reference instead (a graph input ``<tensor>__ref``), so each node runs on the reference's inputs
  and its error is its own. All the cut pieces stay in one graph: the HTP compiles it once and one
  run per sample gives every layer's own error (one session per node would be a compile per node).

A *probe* is a tensor of the float model that the target also computes: for a float target, every
float tensor a node writes; for a QDQ target (ORT's quantizer's naming: the float tensor ``t`` feeds
``QuantizeLinear``, whose ``DequantizeLinear`` writes ``t_DequantizeLinear_Output``, a graph
output's ``X_QuantizeLinear_Input`` is the float ``X``), every activation a ``QuantizeLinear``
quantizes. A QDQ probe is read *after* its quantization (a copy of the pair's DequantizeLinear on the
quantized tensor), which is what the next layer sees and what the float tensor of the same name is
compared with (``qdq_loss_debug``'s ``xmodel_err``). The copies share the pair's scale and zero
point, so the quantized graph's node units (DQ -> op -> Q) stay as the quantizer made them.

Only float tensors computed from the inputs are probed: a shape computation cut into a graph input
would turn a constant the HTP folds into a dynamic one it refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

QUANT_INPUT_SUFFIX = "_QuantizeLinear_Input"  # onnxruntime.quantization.quant_utils' names
DEQUANT_OUTPUT_SUFFIX = "_DequantizeLinear_Output"
PROBE_SUFFIX = "__probe"
REF_SUFFIX = "__ref"
FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)


@dataclass
class Probe:
    """One tensor compared with the float reference: ``tensor`` is its name in the float model,
    ``source`` its name in the target (the tensor a QuantizeLinear reads, for a QDQ target),
    ``node``/``op_type`` the target's node that writes it, ``output`` the debug model's graph
    output that carries it, ``quant`` the QuantizeLinear node that quantizes it (QDQ only)."""

    tensor: str
    source: str
    node: str
    op_type: str
    output: str
    quant: str | None = None


def node_names(graph: onnx.GraphProto) -> list[str]:
    """The project's stable node names (``intake.graph.stable_node_names``), in graph order."""
    from dashboard.intake.graph import stable_node_names

    return stable_node_names([(n.name, n.op_type) for n in graph.node])


def is_qdq(model: onnx.ModelProto) -> bool:
    """A model quantized in the QDQ format: it has activation QuantizeLinear nodes."""
    initializers = {i.name for i in model.graph.initializer}
    return any(n.op_type == "QuantizeLinear" and n.input[0] not in initializers for n in model.graph.node)


def float_tensors(model: onnx.ModelProto) -> dict[str, int]:
    """Every tensor a node writes whose element type is float (shape inference on the model; a
    graph output's declared type counts), by name -> ONNX element type."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # inference is best effort: a custom op stops it, the declared types remain
        inferred = model
    types = {}
    for info in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    return {t: types[t] for n in model.graph.node for t in n.output if t and types.get(t) in FLOATS}


def from_inputs(model: onnx.ModelProto) -> set[str]:
    """The tensors that depend on a graph input (the rest are constants the runtime folds)."""
    initializers = {i.name for i in model.graph.initializer}
    live = {i.name for i in model.graph.input if i.name not in initializers}
    for node in model.graph.node:  # graph order is topological in a valid model
        if any(name in live for name in node.input):
            live.update(o for o in node.output if o)
    return live


def producers(model: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    """Tensor -> (stable node name, op type) of the node that writes it."""
    names = node_names(model.graph)
    return {out: (names[i], n.op_type) for i, n in enumerate(model.graph.node) for out in n.output if out}


def float_probes(model: onnx.ModelProto, reference: set[str]) -> list[Probe]:
    """The probes of a float target: each live float tensor a node writes that the reference has."""
    live, floats, made = from_inputs(model), float_tensors(model), producers(model)
    return [Probe(t, t, *made[t], output=t) for n in model.graph.node for t in n.output
            if t in floats and t in live and t in reference]


def qdq_probes(model: onnx.ModelProto, reference: set[str]) -> list[Probe]:
    """The probes of a QDQ target: each activation QuantizeLinear's float input that the reference
    has (``X_QuantizeLinear_Input`` standing for the graph output ``X``), read after the pair."""
    made, live = producers(model), from_inputs(model)
    names = node_names(model.graph)
    probes = []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "QuantizeLinear" or node.input[0] not in made or node.input[0] not in live:
            continue  # a graph input's or a weight's quantization: no layer computed it
        source = node.input[0]
        tensor = source[: -len(QUANT_INPUT_SUFFIX)] if source.endswith(QUANT_INPUT_SUFFIX) else source
        if tensor in reference:
            probes.append(Probe(tensor, source, *made[source], output=tensor + PROBE_SUFFIX, quant=names[index]))
    return probes


def probes_of(model: onnx.ModelProto, reference: set[str]) -> list[Probe]:
    return qdq_probes(model, reference) if is_qdq(model) else float_probes(model, reference)


def _outputs(model: onnx.ModelProto) -> set[str]:
    return {o.name for o in model.graph.output}


def _float_output(name: str, elem_type: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, None)


def _quant_nodes(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    names = node_names(model.graph)
    return {names[i]: n for i, n in enumerate(model.graph.node)}


def _dequantize_copy(q: onnx.NodeProto, quantized: str, output: str) -> onnx.NodeProto:
    """A DequantizeLinear of ``quantized`` with ``q``'s scale and zero point (and axis)."""
    node = helper.make_node("DequantizeLinear", [quantized, *q.input[1:]], [output], name=output,
                            domain=q.domain)
    node.attribute.extend(a for a in q.attribute if a.name in ("axis", "block_size"))
    return node


def cumulative_model(model: onnx.ModelProto, probes: list[Probe]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph outputs also carry every probe (the model otherwise as it
    is). A QDQ probe is its quantized tensor read back by a copy of the pair's DequantizeLinear; a
    float probe is the tensor itself, as an output too."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    quant, outputs, floats = _quant_nodes(out), _outputs(out), float_tensors(model)
    for probe in probes:
        if probe.output in outputs:
            continue
        if probe.quant is not None:
            q = quant[probe.quant]
            out.graph.node.append(_dequantize_copy(q, q.output[0], probe.output))
        out.graph.output.append(_float_output(probe.output, floats.get(probe.source, TensorProto.FLOAT)))
    return out


def layerwise_model(model: onnx.ModelProto, probes: list[Probe],
                    shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy of ``model`` cut at every probe: what read the probed tensor reads the graph input
    ``<tensor>__ref`` (fed from the float reference; ``shapes`` are the reference's, so every cut
    input is fixed), and the probe's own value is a graph output. For a QDQ probe the pair's
    QuantizeLinear reads the reference and a copy of the pair (same scale and zero point) carries the
    layer's own quantized output: the next layer still gets a quantized input."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    quant, outputs, floats = _quant_nodes(out), _outputs(out), float_tensors(model)
    added: list[onnx.NodeProto] = []
    for probe in probes:
        ref = probe.tensor + REF_SUFFIX
        if probe.quant is not None:
            q = quant[probe.quant]
            own_q = helper.make_node("QuantizeLinear", [probe.source, *q.input[1:]], [ref + "_own_q"],
                                     name=ref + "_own_q", domain=q.domain)
            own_q.attribute.extend(q.attribute)
            added += [own_q, _dequantize_copy(q, own_q.output[0], probe.output)]
            q.input[0] = ref
        else:
            for node in out.graph.node:
                for i, name in enumerate(node.input):
                    if name == probe.source:
                        node.input[i] = ref
        elem_type = TensorProto.FLOAT if probe.quant else floats.get(probe.source, TensorProto.FLOAT)
        out.graph.input.append(helper.make_tensor_value_info(ref, elem_type, list(shapes[probe.tensor])))
        if probe.output not in outputs:
            out.graph.output.append(_float_output(probe.output, floats.get(probe.source, TensorProto.FLOAT)))
    out.graph.node.extend(added)
    return out


def reference_model(model: onnx.ModelProto) -> tuple[onnx.ModelProto, set[str]]:
    """The float model with every live float tensor as a graph output (run on the CPU EP: the
    reference of every probe), and the names of those tensors."""
    live, floats = from_inputs(model), float_tensors(model)
    tensors = {t for n in model.graph.node for t in n.output if t in floats and t in live}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = _outputs(out)
    for name in sorted(tensors - have):
        out.graph.output.append(_float_output(name, floats[name]))
    return out, tensors


def as_float32(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.float32) for k, v in values.items()}


def upstream(model: onnx.ModelProto, probes: list[Probe]) -> dict[str, list[str]]:
    """Each probe's nearest probes upstream (through the tensors in between: a QDQ model's
    Quantize/Dequantize pairs, unprobed casts and reshapes), by float tensor name."""
    by_source = {p.source: p.tensor for p in probes}
    writer = {out: n for n in model.graph.node for out in n.output if out}
    out: dict[str, list[str]] = {}
    for probe in probes:
        node = writer.get(probe.source)
        found: list[str] = []
        stack, seen = list(node.input) if node is not None else [], set()
        while stack:
            name = stack.pop()
            if name in seen or not name:
                continue
            seen.add(name)
            if name in by_source and name != probe.source:
                found.append(by_source[name])
            elif name in writer:
                stack.extend(writer[name].input)
        out[probe.tensor] = sorted(set(found))
    return out
