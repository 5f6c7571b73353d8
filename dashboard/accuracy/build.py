"""Building a QDQ model for the HTP inside the runtime worker, with ONNX Runtime's own tools.

Runs as the worker command ``quantize`` (calibration runs ONNX Runtime sessions: a native crash is a
failed worker, never a dead dashboard). The recipe is Qualcomm's and ORT's: ``qnn_preprocess_model``,
then ``get_qnn_qdq_config`` (the QNN EP's op set, its data types, ``init_overrides`` for tensors
lifted to 16 bits, with the type converts ORT adds at their edges) and ``quantize``, calibrated on the
user's samples. Two things are added by hand:

- ``qnn_preprocess_model`` raises ``TypeError`` on any model with ``metadata_props`` (onnxruntime
  1.32: it passes the repeated field where a dict is expected): the metadata is taken off for the
  call and put back on its result (``preprocess``);
- what ORT left in float (``left_in_float``): a compute node that reads or writes a float tensor no
  Quantize/Dequantize pair surrounds runs in float on the HTP (fp16 at best) or falls back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dashboard.accuracy.protocol import QuantizeArgs, QuantizeBuild
from dashboard.errors import UserError, one_line
from dashboard.partition.protocol import Stage

TYPES = {"u8": "QUInt8", "s8": "QInt8", "u16": "QUInt16", "s16": "QInt16", "int4": "QInt4", "u4": "QUInt4"}
CALIBRATIONS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def preprocess(model_path: str, out_path: str) -> tuple[str, list[str]]:
    """``qnn_preprocess_model`` on ``model_path`` with its metadata kept: the path to quantize (the
    preprocessed copy, or the model itself when there was nothing to change) and notes."""
    import onnx
    from onnxruntime.quantization.execution_providers.qnn import qnn_preprocess_model

    model = onnx.load(model_path)
    metadata = {p.key: p.value for p in model.metadata_props}
    if metadata:
        del model.metadata_props[:]
    with tempfile.TemporaryDirectory(prefix="qbl-qnn-pre-") as folder:
        bare = str(Path(folder) / "bare.onnx")
        onnx.save(model, bare)
        changed = qnn_preprocess_model(bare, out_path)
        source = out_path if changed else bare
        result = onnx.load(source)
    kept = {p.key: p.value for p in result.metadata_props}
    onnx.helper.set_model_props(result, {**metadata, **kept})
    onnx.save(result, out_path)
    notes = ["qnn_preprocess_model " + ("rewrote the graph (fusions, names)" if changed else "changed nothing")]
    if metadata:
        notes.append(f"the model's {len(metadata)} metadata entr{'y' if len(metadata) == 1 else 'ies'} were taken off "
                     "for qnn_preprocess_model (it raises TypeError on metadata_props in onnxruntime 1.32) and put back")
    return out_path, notes


class Reader:
    """ORT's ``CalibrationDataReader`` over the saved samples (subclassed at call time: the class
    lives in onnxruntime, imported only in the worker)."""

    def __init__(self, samples: list[dict]) -> None:
        self.samples = samples
        self.index = 0

    def get_next(self):
        if self.index >= len(self.samples):
            return None
        self.index += 1
        return self.samples[self.index - 1]

    def rewind(self) -> None:
        self.index = 0


def calibration_reader(samples: list[dict]):
    from onnxruntime.quantization import CalibrationDataReader

    class _Reader(Reader, CalibrationDataReader):
        pass

    return _Reader(samples)


def overrides_for(lifted: dict[str, str]) -> dict[str, list[dict]]:
    """``init_overrides`` for ``get_qnn_qdq_config``: each lifted tensor's activation type."""
    from onnxruntime.quantization import QuantType

    return {tensor: [{"quant_type": getattr(QuantType, TYPES[kind])}] for tensor, kind in lifted.items()}


def run(args: QuantizeArgs, emit) -> QuantizeBuild:
    from onnxruntime.quantization import CalibrationMethod, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    from dashboard.accuracy.data import load_saved

    data = load_saved(args.data)
    if not len(data):
        raise UserError("quantization needs calibration samples: the data set is empty")
    out = Path(args.out)
    emit(Stage("qnn_preprocess_model", 0.1))
    with tempfile.TemporaryDirectory(prefix="qbl-quantize-") as folder:
        source, notes = preprocess(args.path, str(Path(folder) / "pre.onnx"))
        emit(Stage(f"calibrating on {len(data)} sample(s) ({args.calibration})", 0.3))
        try:
            config = get_qnn_qdq_config(
                source, calibration_reader(list(data.samples)),
                calibrate_method=getattr(CalibrationMethod, CALIBRATIONS[args.calibration]),
                activation_type=getattr(QuantType, TYPES[args.activations]),
                weight_type=getattr(QuantType, TYPES[args.weights]), per_channel=args.per_channel,
                init_overrides=overrides_for(args.lifted) or None)
            emit(Stage("writing the QDQ model", 0.8))
            quantize(source, str(out), config)
        except UserError:
            raise
        except Exception as exc:  # ORT's quantizer raises many types; each is this model's failure here
            raise UserError(f"ONNX Runtime's quantizer failed: {one_line(exc)}") from None
    return QuantizeBuild(out=str(out), left_float=left_in_float(str(out)), notes=notes)


def left_in_float(path: str) -> list[list[str]]:
    """[node, op type] of each compute node that reads or writes a float activation outside a
    Quantize/Dequantize pair (a graph input's own QuantizeLinear and a graph output's DequantizeLinear
    are the pairs' ends, not float work)."""
    import onnx

    from dashboard.accuracy.probes import from_inputs, node_names

    model = onnx.load(path, load_external_data=False)
    names = node_names(model.graph)
    writer = {o: n.op_type for n in model.graph.node for o in n.output}
    readers: dict[str, list[str]] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.op_type)
    live = from_inputs(model)
    floats = set(_float_names(model))
    left = []
    for index, node in enumerate(model.graph.node):
        if node.op_type in QDQ_OPS or node.op_type in ("Shape", "Constant"):
            continue
        ins = [i for i in node.input if i in live and i in floats]
        outs = [o for o in node.output if o in floats]
        unquantized_in = any(writer.get(i) != "DequantizeLinear" for i in ins)
        unquantized_out = any(o and any(r != "QuantizeLinear" for r in readers.get(o, [])) for o in outs) or \
            any(o and not readers.get(o) for o in outs)
        if (ins or outs) and (unquantized_in or unquantized_out):
            left.append([names[index], node.op_type])
    return left


def _float_names(model) -> list[str]:
    from dashboard.accuracy.probes import float_tensors

    inputs = [i.name for i in model.graph.input if i.type.tensor_type.elem_type in (1, 10)]
    return list(float_tensors(model)) + inputs
