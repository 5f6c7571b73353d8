"""Predicted QNN GPU support, from a documented rule table.

Where there is no Adreno GPU (this x86_64 host: ``libQnnGpu.so`` fails to initialize), the GPU
column of a partition report comes from here and every figure derived from it is labelled
*predicted*. A report captured on a device with ``partition --out`` replaces it (``--device-report``
on the command line, an upload in the UI).

The prediction is made per node of the graph the EP really receives (after ONNX Runtime's level-1
optimizations, with the shapes inferred on that graph from the user's dimensions) and follows the
EP's own decision order:

1. EP-level refusals that do not depend on the backend: unknown op domains, control flow, dynamic
   shapes, ops without an op builder.
2. The EP's node-group fusions, which run before the op builders for every backend
   (``qnn_node_group``). Only one changes a GPU verdict: ``GeluFusion`` turns Div -> Erf -> Add ->
   Mul -> Mul into one QNN Gelu, although Erf alone has no builder (``fusion_groups``). The others
   (Conv+activation, HardSigmoid+Mul, ReshapeGemm, ScaleSoftmax, ChannelShuffle) combine ops the
   table already accepts one by one, and the LPBQ ones are NPU-only.
3. Op rules: GPU-specific refusals and conditions from the EP source (``IsGpuBackend`` checks),
   from the EP's GPU test suite (tests disabled on GPU, with their recorded reason) and from
   Qualcomm's GPU op documentation.
4. Data types: the GPU backend runs float32/float16 activations; quantized (QDQ) activations are
   refused, quantized *weights* feeding float activations are accepted.

Why nothing here reads the measured HTP session: the HTP's verdicts depend on the HTP's options
(precision, SoC) and vanish when its session fails, and a GPU prediction that changed with them
would say more about the HTP than about the GPU.

Each rule names its source (``SOURCES``); ``confidence`` is ``documented`` when a GPU-specific
source states it and ``assumed`` when only the general statements apply (the EP has a builder and
the GPU backend supports float ops). An op absent from the table is predicted unsupported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# -- sources ---------------------------------------------------------------------------------------
EP_REPO = "GitHub onnxruntime/onnxruntime-qnn"
SOURCES: dict[str, str] = {
    "ep-builders": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/op_builder_factory.cc (commit cee6c0d) and "
                   "docs/execution_providers/QNN-ExecutionProvider.md 'Supported ONNX operators' (commit 0131740): "
                   "the ONNX ops the EP can translate at all, for any backend",
    "ep-docs-gpu": f"{EP_REPO} docs/execution_providers/QNN-ExecutionProvider.md 'Running a model with QNN EP's "
                   "GPU backend' (commit 0131740): float32/float16 activations and weights; uint8 weights with "
                   "float activations",
    "ep-docs-model": f"{EP_REPO} docs/execution_providers/QNN-ExecutionProvider.md 'Model requirements': no "
                     "dynamic shapes, no Loop/If",
    "ep-matmulnbits": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/matmulnbits_op_builder.cc: "
                      "kGpuSupportedBits{4}, kGpuSupportedBlockSize{32}, input A float32/float16, symmetric "
                      "zero points on GPU",
    "ep-gqa": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/group_query_attention_op_builder.cc: "
              "without an op_affinity config GroupQueryAttention is opt-out on GPU (claimed) and opt-in on HTP",
    "ep-gbq": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/gatherblockquantized_op_builder.cc: "
              "'GatherBlockQuantized: GPU backend only', bits == 4, quantize_axis == 1",
    "ep-nms": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/non_max_suppression_op_builder.cc: "
              "'NonMaxSuppression is not supported on QNN GPU backend'",
    "ep-lppool": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/lp_pool_op_builder.cc (message in "
                 "onnxruntime-qnn 2.7.0): 'rank-5 (3D pooling) is not supported on the QNN GPU backend'",
    "ep-einsum": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/einsum_op_builder.cc "
                 "(IsGpuBackend): ReduceSumMulBroadcastX equations refused on GPU",
    "ep-rotary": f"{EP_REPO} docs 'Supported ONNX operators': RotaryEmbedding 'HTP backend only'; the EP refuses "
                 "com.microsoft.RotaryEmbedding on every backend",
    "ep-gpu-tests": f"{EP_REPO} onnxruntime/test/providers/qnn/*_test.cc, QnnGPUBackendTests (commit cee6c0d): "
                    "ops tested on GPU, and tests disabled on GPU with their reason",
    "qnn-gpu-history": "Qualcomm AI Engine Direct SDK docs 80-63442-10, 'QNN GPU Op Support Revision History' "
                       "(gpu_opdef_version_history): per-SDK GPU op additions",
    "qnn-gpu-supplement": "Qualcomm AI Engine Direct SDK docs 80-63442-10, 'GPU Backend Op Definition Supplement' "
                          "(GpuOpDefSupplement): GPU ops and data types (FLOAT_32, FLOAT_16)",
    "qnn-gpu-overview": "Qualcomm AI Engine Direct Delegate docs 80-63442-50 'Acceleration Support': the GPU "
                        "backend supports float32 and float16 operators and activations",
    "ep-mod": f"{EP_REPO} onnxruntime/core/providers/qnn/builder/opbuilder/mod_op_builder.cc: 'QNN Mod Op only "
              "support fmod == 0', checked before any backend",
    "ep-fusions": f"{EP_REPO} docs/execution_providers/QNN-ExecutionProvider.md 'Supported operator fusions' and "
                  "onnxruntime/core/providers/qnn/builder/qnn_node_group/gelu_fusion.cc: fusions run before op "
                  "builders, for every backend except the LPBQ ones (IsNpuBackend); GeluFusion matches "
                  "x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5 (either order of the two Muls)",
}

DOCUMENTED, ASSUMED = "documented", "assumed"
GELU_QNN_OP = "Gelu (GeluFusion)"


# -- node facts ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorFacts:
    name: str
    dtype: str | None
    shape: tuple | None
    constant: bool = False
    value: float | None = None  # a one-element constant's value (fusion patterns compare them)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)


@dataclass(frozen=True)
class NodeFacts:
    """What a rule may look at: op, attributes, and the dtype/shape/constness of each tensor."""

    name: str
    op_type: str
    domain: str = ""
    attrs: dict = field(default_factory=dict)
    inputs: tuple[TensorFacts, ...] = ()
    outputs: tuple[TensorFacts, ...] = ()
    subgraphs: int = 0

    @property
    def key(self) -> str:
        return self.op_type if self.domain in ("", "ai.onnx") else f"{self.domain}::{self.op_type}"

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)


@dataclass(frozen=True)
class Prediction:
    supported: bool
    reason: str | None
    qnn_op: str | None
    rule: str
    source: str
    confidence: str


# -- the table -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpRule:
    """GPU support of one ONNX op: the QNN op it becomes, the conditions that refuse it (each a
    function returning a reason or None, with its source), and how well the support is documented."""

    qnn_op: str
    source: str
    confidence: str = DOCUMENTED
    checks: tuple[tuple[Callable[[NodeFacts], str | None], str], ...] = ()
    note: str = ""


def _float_only(node: NodeFacts) -> str | None:
    for tensor in node.inputs[:1]:
        if tensor.dtype and tensor.dtype not in ("float32", "float16"):
            return f"input A is {tensor.dtype}; QNN GPU MatMulNBits expects float32 or float16"
    return None


def _nbits(node: NodeFacts) -> str | None:
    bits, block = node.attr("bits"), node.attr("block_size")
    if bits is not None and bits != 4:
        return f"QNN GPU does not support MatMulNBits with bits={bits}"
    if block is not None and block != 32:
        return f"QNN GPU does not support MatMulNBits with block_size={block}"
    return None


def _gbq(node: NodeFacts) -> str | None:
    if node.attr("bits", 4) != 4:
        return "GatherBlockQuantized: only INT4 (bits == 4) supported"
    if node.attr("quantize_axis", 1) != 1:
        return "GatherBlockQuantized: only quantize_axis == 1 supported on QNN GPU"
    return None


def _rank5(what: str) -> Callable[[NodeFacts], str | None]:
    def check(node: NodeFacts) -> str | None:
        rank = node.inputs[0].rank if node.inputs else None
        return f"{what} on rank-{rank} input is not supported by the QNN GPU backend" if rank and rank >= 5 else None
    return check


def _conv_groups(node: NodeFacts) -> str | None:
    group = node.attr("group", 1)
    x = node.inputs[0] if node.inputs else None
    if group > 1 and x is not None and x.is_static and len(x.shape) >= 2:
        channels = x.shape[1]
        if channels != group and channels // group == 3:
            return f"grouped Conv with {group} groups of 3 channels fails on the GPU backend"
    return None


def _mod_fmod(node: NodeFacts) -> str | None:
    return "QNN Mod Op only support fmod == 0 for now." if node.attr("fmod", 0) == 1 else None


def _clip_int(node: NodeFacts) -> str | None:
    dtype = node.inputs[0].dtype if node.inputs else None
    return f"Clip on {dtype} does not work on the GPU backend" if dtype and dtype.startswith(("int", "uint")) else None


def _matmul_batch_broadcast(node: NodeFacts) -> str | None:
    if len(node.inputs) < 2:
        return None
    a, b = node.inputs[0], node.inputs[1]
    if not (a.is_static and b.is_static) or len(a.shape) < 3 or len(b.shape) < 3:
        return None
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    width = min(len(batch_a), len(batch_b))
    for da, db in zip(batch_a[-width:], batch_b[-width:]):
        if da == 1 and db > 1:
            return "MatMul broadcasting a batch dimension of input A is a known GPU failure"
    return None


def _pad_reflect(node: NodeFacts) -> str | None:
    rank = node.inputs[0].rank if node.inputs else None
    if node.attr("mode", "constant") == "reflect" and rank is not None and rank != 4:
        return "Pad reflect (MIRROR_REFLECT) needs a rank-4 input on the GPU backend"
    return None


def _einsum(node: NodeFacts) -> str | None:
    """The EP's ``IsEquationReduceSumMulBroadcastX`` (e.g. ``bhwc,wkc->bhwk``), refused on GPU."""
    equation = str(node.attr("equation", "")).replace(" ", "")
    if "->" not in equation or equation.count(",") != 1:
        return None
    lhs, out = equation.split("->", 1)
    t1, t2 = lhs.split(",")
    if (len(t1), len(t2), len(out)) == (4, 3, 4) and t1[3] == t2[2] and t1[2] == t2[0] == out[2] \
            and t2[1] == out[3] and t1[0] == out[0] and t1[1] == out[1]:
        return f"Einsum unsupported equation: {equation} on backend GPU"
    return None


def _rank_at_most(limit: int, what: str) -> Callable[[NodeFacts], str | None]:
    def check(node: NodeFacts) -> str | None:
        rank = node.inputs[0].rank if node.inputs else None
        return f"{what} supports input rank <= {limit} on GPU (got {rank})" if rank and rank > limit else None
    return check


def _concat(node: NodeFacts) -> str | None:
    rank = node.outputs[0].rank if node.outputs else None
    axis = node.attr("axis", 0)
    if rank == 5:
        batch = node.outputs[0].shape[0] if node.outputs[0].shape else None
        if (axis % 5) != 1 or batch != 1:
            return "Concat on rank 5 is supported on GPU only along axis 1 with batch 1"
    return None


def _resize(node: NodeFacts) -> str | None:
    mode = node.attr("mode", "nearest")
    return None if mode in ("nearest", "linear", "cubic") else f"Resize mode {mode!r} not supported on GPU"


_TESTED = "ep-gpu-tests"
_HIST = "qnn-gpu-history"
_SUPP = "qnn-gpu-supplement"

GPU_OPS: dict[str, OpRule] = {
    # element-wise binary (ElementWiseAdd ... ; INT_32 BinaryElementwise since QNN 2.39)
    **{op: OpRule(f"ElementWise{q}", _SUPP) for op, q in {
        "Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Div": "Divide", "Pow": "Power", "Max": "Maximum",
        "Min": "Minimum", "Equal": "Equal", "Greater": "Greater", "GreaterOrEqual": "GreaterEqual",
        "Less": "Less", "LessOrEqual": "LessEqual", "And": "And", "Or": "Or", "Where": "Select", "Sum": "Add",
    }.items()},
    # element-wise unary
    **{op: OpRule(f"ElementWise{q}", _SUPP) for op, q in {
        "Abs": "Abs", "Neg": "Neg", "Exp": "Exp", "Log": "Log", "Sqrt": "SquareRoot", "Floor": "Floor",
        "Ceil": "Ceil", "Round": "Round", "Sin": "Sin", "Cos": "Cos", "Not": "Not",
    }.items()},
    "Sign": OpRule("ElementWiseSign", _HIST),
    "Reciprocal": OpRule("ElementWiseDivide", _SUPP, ASSUMED),
    "Softplus": OpRule("ElementWiseSoftplus", _HIST),
    "Tanh": OpRule("Tanh", _SUPP), "Sigmoid": OpRule("Sigmoid", _SUPP), "Relu": OpRule("Relu", _SUPP),
    "LeakyRelu": OpRule("Prelu", _SUPP), "PRelu": OpRule("Prelu", _SUPP), "Elu": OpRule("Elu", _SUPP),
    "Gelu": OpRule("Gelu", _SUPP), "com.microsoft::Gelu": OpRule("Gelu", _SUPP),
    "com.microsoft::QuickGelu": OpRule("Gelu", "ep-builders", ASSUMED),
    "HardSigmoid": OpRule("ElementWiseNeuron", _HIST), "HardSwish": OpRule("HardSwish", _SUPP),
    "Clip": OpRule("ReluMinMax", _TESTED, checks=((_clip_int, _TESTED),)),
    # normalization
    "LayerNormalization": OpRule("LayerNorm", _HIST),
    "SimplifiedLayerNormalization": OpRule("RmsNorm", _HIST, checks=((_rank_at_most(4, "RmsNorm"), _HIST),)),
    "RMSNormalization": OpRule("RmsNorm", _HIST, checks=((_rank_at_most(4, "RmsNorm"), _HIST),)),
    "GroupNormalization": OpRule("GroupNorm", _HIST, checks=((_rank_at_most(4, "GroupNorm"), _HIST),)),
    "InstanceNormalization": OpRule("InstanceNorm", _SUPP, ASSUMED),
    "BatchNormalization": OpRule("Batchnorm", _SUPP),
    "LpNormalization": OpRule("L2Norm", _HIST),
    "Softmax": OpRule("Softmax", _SUPP), "LogSoftmax": OpRule("LogSoftmax", _SUPP, ASSUMED),
    # linear algebra
    "MatMul": OpRule("MatMul", _TESTED, checks=((_matmul_batch_broadcast, _TESTED),)),
    "Gemm": OpRule("FullyConnected", _TESTED),
    "com.microsoft::FusedMatMul": OpRule("MatMul", "ep-builders", ASSUMED),
    "Einsum": OpRule("MatMul", _TESTED, checks=((_einsum, "ep-einsum"),)),
    "com.microsoft::MatMulNBits": OpRule("FullyConnected", "ep-matmulnbits",
                                         checks=((_nbits, "ep-matmulnbits"), (_float_only, "ep-matmulnbits"))),
    "com.microsoft::GatherBlockQuantized": OpRule("Gather", "ep-gbq", checks=((_gbq, "ep-gbq"),)),
    "com.microsoft::GroupQueryAttention": OpRule("GroupQueryAttention", "ep-gqa"),
    # convolution and pooling
    "Conv": OpRule("Conv2d", _TESTED, checks=((_rank5("3D Conv"), _TESTED), (_conv_groups, _TESTED))),
    "ConvTranspose": OpRule("TransposeConv2d", _TESTED, checks=((_rank5("3D ConvTranspose"), _TESTED),)),
    "AveragePool": OpRule("PoolAvg2d", _TESTED), "GlobalAveragePool": OpRule("PoolAvg2d", _TESTED),
    "MaxPool": OpRule("PoolMax2d", _SUPP), "GlobalMaxPool": OpRule("PoolMax2d", _SUPP),
    "LpPool": OpRule("LpPool", "ep-lppool", checks=((_rank5("LpPool"), "ep-lppool"),)),
    # shape and data movement
    "Reshape": OpRule("Reshape", _TESTED), "Flatten": OpRule("Reshape", _TESTED),
    "Squeeze": OpRule("Reshape", _SUPP), "Unsqueeze": OpRule("Reshape", _SUPP),
    "Expand": OpRule("ElementWiseMultiply", _TESTED), "Transpose": OpRule("Transpose", _SUPP),
    "Concat": OpRule("Concat", _HIST, checks=((_concat, _HIST),)),
    "Split": OpRule("Split", _SUPP), "Slice": OpRule("StridedSlice", _HIST),
    "Gather": OpRule("Gather", _HIST), "GatherElements": OpRule("GatherElements", _SUPP, ASSUMED),
    "GatherND": OpRule("GatherNd", _HIST), "ScatterND": OpRule("ScatterNd", _HIST),
    "ScatterElements": OpRule("ScatterElements", _HIST), "Tile": OpRule("Tile", _SUPP, ASSUMED),
    "Pad": OpRule("Pad", _TESTED, checks=((_pad_reflect, _TESTED),)),
    "DepthToSpace": OpRule("DepthToSpace", _SUPP), "SpaceToDepth": OpRule("SpaceToDepth", _SUPP),
    "Resize": OpRule("Resize", _HIST, checks=((_resize, _HIST),)), "Upsample": OpRule("Resize", _HIST),
    "GridSample": OpRule("GridSample", _HIST, checks=((_rank_at_most(4, "GridSample"), _HIST),)),
    "CumSum": OpRule("CumulativeSum", _HIST),
    "Mod": OpRule("Mod", "ep-builders", ASSUMED, checks=((_mod_fmod, "ep-mod"),)),
    "TopK": OpRule("TopK", _SUPP, ASSUMED),
    "Cast": OpRule("Cast", _TESTED, note="INT_64 outputs since QNN SDK 2.40"),
    "ArgMax": OpRule("Argmax", _HIST, note="needs the int32->int64 Cast added in QNN SDK 2.40"),
    "ArgMin": OpRule("Argmin", _HIST, note="needs the int32->int64 Cast added in QNN SDK 2.40"),
    # reductions
    **{op: OpRule(q, _SUPP) for op, q in {
        "ReduceMax": "ReduceMax", "ReduceMean": "ReduceMean", "ReduceMin": "ReduceMin",
        "ReduceProd": "ReduceProd", "ReduceSum": "ReduceSum"}.items()},
    "ReduceL2": OpRule("L2Norm", _SUPP, ASSUMED),
    # quantization: only weights; activations must stay float on GPU
    "DequantizeLinear": OpRule("Dequantize", "ep-docs-gpu"),
    "com.microsoft::DequantizeLinear": OpRule("Dequantize", "ep-docs-gpu"),
    # ops with an EP builder and no GPU-specific statement either way
    **{op: OpRule(op, "ep-builders", ASSUMED) for op in (
        "LRN", "LSTM", "Mean", "IsNaN", "Tan", "Asin", "Atan", "ThresholdedRelu", "Inverse", "RoiAlign",
        "STFT", "RandomUniformLike", "Identity", "NonZero")},
}

GPU_UNSUPPORTED: dict[str, tuple[str, str]] = {
    "NonMaxSuppression": ("NonMaxSuppression is not supported on QNN GPU backend.", "ep-nms"),
    "RotaryEmbedding": ("RotaryEmbedding is supported on the QNN HTP backend only.", "ep-rotary"),
    "com.microsoft::RotaryEmbedding": ("QNN EP only supports standard ONNX RotaryEmbedding (opset 23+), not "
                                       "com.microsoft.RotaryEmbedding.", "ep-rotary"),
    "QuantizeLinear": ("QNN GPU runs float activations only; QuantizeLinear produces quantized activations.",
                       "ep-docs-gpu"),
    "com.microsoft::QuantizeLinear": ("QNN GPU runs float activations only; QuantizeLinear produces quantized "
                                      "activations.", "ep-docs-gpu"),
}

_QUANT_DTYPES = ("uint8", "int8", "uint16", "int16", "uint4", "int4")
_KNOWN_DOMAINS = ("", "ai.onnx", "com.microsoft")


def fusion_groups(nodes: list[NodeFacts]) -> dict[str, str]:
    """Nodes the EP fuses into a QNN Gelu before any op builder runs (``GeluFusion``): node name ->
    the Erf the group is built around. Matched as the EP does: Div by sqrt(2) -> Erf -> Add 1 ->
    Mul, with the 0.5 either on the root (Mul(root, 0.5) feeding the last Mul) or last."""
    producer = {t.name: n for n in nodes for t in n.outputs}
    consumers: dict[str, list[NodeFacts]] = {}
    for n in nodes:
        for t in n.inputs:
            consumers.setdefault(t.name, []).append(n)
    groups: dict[str, str] = {}
    for erf in nodes:
        members = _gelu_members(erf, producer, consumers) if erf.key == "Erf" else None
        for member in members or ():
            groups.setdefault(member.name, erf.name)
    return groups


def _gelu_members(erf: NodeFacts, producer: dict, consumers: dict) -> list[NodeFacts] | None:
    div = producer.get(erf.inputs[0].name) if erf.inputs else None
    if div is None or div.key != "Div" or len(div.inputs) < 2 or not _near(div.inputs[1], 2 ** 0.5):
        return None
    add = _only_consumer(erf, consumers)
    erf_out = erf.outputs[0].name
    if add is None or add.key != "Add" or not any(_near(t, 1.0, 1e-2) for t in add.inputs if t.name != erf_out):
        return None
    mul = _only_consumer(add, consumers)
    if mul is None or mul.key != "Mul":
        return None
    root = div.inputs[0].name
    for t in mul.inputs:  # pattern 1: Mul(root, 0.5) feeds the last Mul
        half = producer.get(t.name)
        if half is not None and half.key == "Mul" and any(i.name == root for i in half.inputs) \
                and any(_near(i, 0.5) for i in half.inputs if i.name != root):
            return [div, erf, add, half, mul]
    last = _only_consumer(mul, consumers)  # pattern 2: Mul(root, ...) then Mul(..., 0.5)
    if any(t.name == root for t in mul.inputs) and last is not None and last.key == "Mul" \
            and any(_near(t, 0.5) for t in last.inputs if t.name != mul.outputs[0].name):
        return [div, erf, add, mul, last]
    return None


def _only_consumer(node: NodeFacts, consumers: dict) -> NodeFacts | None:
    readers = consumers.get(node.outputs[0].name, []) if node.outputs else []
    return readers[0] if len(readers) == 1 else None


def _near(tensor: TensorFacts, value: float, tolerance: float = 1e-3) -> bool:
    return tensor.constant and tensor.value is not None and abs(tensor.value - value) <= tolerance


def predict_node(node: NodeFacts, fused: bool = False) -> Prediction:
    """The predicted GPU verdict for one node of the graph the EP receives (``fused``: the node is
    part of a group ``fusion_groups`` found)."""
    if node.domain not in _KNOWN_DOMAINS:
        return Prediction(False, f"custom op domain {node.domain!r}: no QNN op builder", None, "domain",
                          "ep-builders", DOCUMENTED)
    if node.subgraphs:
        return Prediction(False, f"{node.op_type} has control-flow subgraphs; QNN EP does not take Loop/If/Scan",
                          None, "control-flow", "ep-docs-model", DOCUMENTED)
    # A symbolic dimension left after the user's dimensions is the evidence; an unknown shape (a
    # tensor whose shape inference gave up) is not.
    dynamic = [t.name for t in (*node.inputs, *node.outputs)
               if t.name and not t.constant and t.shape is not None and not t.is_static]
    if dynamic:
        return Prediction(False, f"Cannot get shape: {dynamic[0]!r} is not static (fix its dimensions)", None,
                          "static-shapes", "ep-docs-model", DOCUMENTED)
    if fused:
        return Prediction(True, None, GELU_QNN_OP, "ep-fusion:GeluFusion", "ep-fusions", DOCUMENTED)
    refused = GPU_UNSUPPORTED.get(node.key)
    if refused:
        return Prediction(False, refused[0], None, f"unsupported:{node.key}", refused[1], DOCUMENTED)
    rule = GPU_OPS.get(node.key)
    if rule is None:
        return Prediction(False, f"Operators of type `{node.op_type}` are not in the QNN GPU rule table "
                                 "(no known QNN EP builder)", None, "not-in-table", "ep-builders", DOCUMENTED)
    if node.key.endswith("DequantizeLinear") and node.inputs and not node.inputs[0].constant:
        return Prediction(False, "QNN GPU runs float activations only; this DequantizeLinear reads a quantized "
                                 "activation (only quantized weights are supported)", None, "quantized-activation",
                          "ep-docs-gpu", DOCUMENTED)
    if not node.key.endswith(("DequantizeLinear", "MatMulNBits", "GatherBlockQuantized")):
        quantized = [t for t in node.inputs if not t.constant and t.dtype in _QUANT_DTYPES]
        if quantized and node.op_type not in ("Cast", "Gather", "Reshape", "Concat", "Where", "Equal"):
            return Prediction(False, f"QNN GPU runs float activations; input {quantized[0].name!r} is "
                                     f"{quantized[0].dtype}", None, "quantized-activation", "qnn-gpu-overview",
                              DOCUMENTED)
    for check, source in rule.checks:
        reason = check(node)
        if reason:
            return Prediction(False, reason, None, f"check:{node.key}", source, DOCUMENTED)
    return Prediction(True, None, rule.qnn_op, f"op:{node.key}", rule.source, rule.confidence)


def predict(nodes: list[NodeFacts]) -> dict[str, Prediction]:
    """Predicted GPU verdict per node name, from the graph alone."""
    fused = fusion_groups(nodes)
    return {node.name: predict_node(node, node.name in fused) for node in nodes}


def rule_table() -> list[dict]:
    """The table as rows, for the UI and the README: op, QNN op, verdict, conditions, source."""
    rows = []
    for op, rule in sorted(GPU_OPS.items()):
        rows.append({"op": op, "gpu": "supported", "qnn_op": rule.qnn_op, "confidence": rule.confidence,
                     "conditions": "; ".join(fn.__name__.strip("_").replace("_", " ") for fn, _ in rule.checks)
                     + (f" ({rule.note})" if rule.note else ""),
                     "source": SOURCES[rule.source]})
    for op, (reason, source) in sorted(GPU_UNSUPPORTED.items()):
        rows.append({"op": op, "gpu": "unsupported", "qnn_op": None, "confidence": DOCUMENTED,
                     "conditions": reason, "source": SOURCES[source]})
    return rows
