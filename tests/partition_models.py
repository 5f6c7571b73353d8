"""Small models whose QNN partitioning is known in advance, for the partition tests.

Each builder returns an ``onnx.ModelProto``; ``save(model, dir, name)`` writes it. What the HTP
must do with each node is stated next to it and asserted by the tests against the real simulator.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def save(model: onnx.ModelProto, directory: Path, name: str) -> Path:
    path = Path(directory) / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def rejects_model() -> onnx.ModelProto:
    """Conv -> (unnamed) Relu -> Erf -> Mod(fmod=1) -> Mul -> Sigmoid, static shapes.

    HTP claims conv0 (renamed conv0_token_N by the layout transformation, with inserted
    Transposes), the unnamed Relu (stable name ``Relu#1``), mul0 and sig0; it refuses erf0
    ("Operators of type `Erf` are not supported") and mod0 ("QNN Mod Op only support fmod == 0").
    """
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Erf", ["r"], ["e"], name="erf0"),
        helper.make_node("Mod", ["e", "two"], ["m"], name="mod0", fmod=1),
        helper.make_node("Mul", ["m", "two"], ["y"], name="mul0"),
        helper.make_node("Sigmoid", ["y"], ["z"], name="sig0"),
    ]
    inits = [numpy_helper.from_array(rng.random((4, 3, 3, 3), dtype=np.float32), "w"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", F, [1, 4, 8, 8]),
                   helper.make_tensor_value_info("z", F, [1, 4, 8, 8])], inits)


def named_chain_model() -> onnx.ModelProto:
    """Every node named, no layout-sensitive op and nothing ORT's level-1 optimizer changes:
    Add -> Mul -> Erf -> Tanh -> Sub. HTP claims all but erf0, in two QNN subgraphs."""
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="add0"),
        helper.make_node("Mul", ["a", "x"], ["b"], name="mul0"),
        helper.make_node("Erf", ["b"], ["c"], name="erf0"),
        helper.make_node("Tanh", ["c"], ["d"], name="tanh0"),
        helper.make_node("Sub", ["d", "x"], ["y"], name="sub0"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 64])],
                  [helper.make_tensor_value_info("y", F, [1, 64])])


def dynamic_model(batch: str | None = "batch") -> onnx.ModelProto:
    """MatMul -> Add -> Relu on an input of shape [batch, 16] (``batch=None``: an unnamed dynamic
    dimension, which no override by name can fix)."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul0"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add0"),
        helper.make_node("Relu", ["a"], ["y"], name="relu0"),
    ]
    inits = [numpy_helper.from_array(rng.random((16, 8), dtype=np.float32), "w"),
             numpy_helper.from_array(rng.random((8,), dtype=np.float32), "b")]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [batch, 16])],
                  [helper.make_tensor_value_info("y", F, [batch, 8])], inits)


def erf_only_model() -> onnx.ModelProto:
    """Erf -> Erf: QNN has no Erf builder, so the HTP sets up and refuses both nodes."""
    nodes = [helper.make_node("Erf", ["x"], ["a"], name="erf0"), helper.make_node("Erf", ["a"], ["y"], name="erf1")]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 8])], [helper.make_tensor_value_info("y", F, [1, 8])])


def worker_device(directory: Path, code: str):
    """A local ``Device`` whose "python" runs ``code`` as the worker: a real process, reached
    through the same ``Device`` the page and the CLI use (a crashing, hanging or forged worker)."""
    from dashboard.runtime.devices import Device

    script = Path(directory) / f"python-{abs(hash(code))}"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c {shlex.quote(code)}\n")
    script.chmod(0o755)
    return Device.parse(f"local?python={script}")


# -- patterns ONNX Runtime's optimizers rewrite (issue 16's fusion sweep) --------------------------------
# Each is a small graph a CPU-only session rewrites (a level-1/2/extended fusion or decomposition) and
# the QNN EP may take whole: the partition report must say what the EP did with every node.
_rng = np.random.default_rng(16)


def _w(name: str, *shape: int, scale: float = 0.1) -> onnx.TensorProto:
    return numpy_helper.from_array((_rng.standard_normal(shape) * scale).astype(np.float32), name)


def _c(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def _io(x_shape, y_shape, extra_inputs=()):
    inputs = [helper.make_tensor_value_info("x", F, x_shape), *extra_inputs]
    return inputs, [helper.make_tensor_value_info("y", F, y_shape)]


N = helper.make_node
IMG, SEQ = [1, 16, 8, 8], [1, 8, 32]


def _conv(name: str, x: str, out: str, weight: str, bias: str | None = None):
    return N("Conv", [x, weight] + ([bias] if bias else []), [out], name=name, pads=[1, 1, 1, 1])


def _img(nodes, inits=(), opset: int = 17, out=IMG):
    used = {t for n in nodes for t in n.input}
    weights = [_w(name, 16, 16, 3, 3) for name in ("w0", "w1") if name in used]
    return _model(nodes, *_io(IMG, out), list(inits) + weights, opset)


def _seq(nodes, inits=(), opset: int = 17, out=SEQ):
    return _model(nodes, *_io(SEQ, out), inits, opset)


def _gelu_erf(x: str, y: str, p: str) -> list:
    """0.5 * x * (1 + erf(x / sqrt(2))): ORT's GeluFusion (level 2) makes one Gelu of it."""
    return [N("Div", [x, "sqrt2"], [f"{p}d"], name=f"{p}div"), N("Erf", [f"{p}d"], [f"{p}e"], name=f"{p}erf"),
            N("Add", [f"{p}e", "one"], [f"{p}a"], name=f"{p}add"), N("Mul", [x, f"{p}a"], [f"{p}m"], name=f"{p}mul"),
            N("Mul", [f"{p}m", "half"], [y], name=f"{p}half")]


GELU_CONSTS = [_c("sqrt2", 1.4142135), _c("one", 1.0), _c("half", 0.5)]


def _layernorm(x: str, y: str, p: str) -> list:
    """The decomposed LayerNorm ORT's LayerNormFusion (level 2) folds into LayerNormalization."""
    return [N("ReduceMean", [x], [f"{p}mu"], name=f"{p}mean", axes=[-1]),
            N("Sub", [x, f"{p}mu"], [f"{p}d"], name=f"{p}sub"),
            N("Pow", [f"{p}d", "two"], [f"{p}sq"], name=f"{p}pow"),
            N("ReduceMean", [f"{p}sq"], [f"{p}var"], name=f"{p}var_mean", axes=[-1]),
            N("Add", [f"{p}var", "eps"], [f"{p}ve"], name=f"{p}add_eps"),
            N("Sqrt", [f"{p}ve"], [f"{p}std"], name=f"{p}sqrt"),
            N("Div", [f"{p}d", f"{p}std"], [f"{p}n"], name=f"{p}div"),
            N("Mul", [f"{p}n", "gamma"], [f"{p}g"], name=f"{p}scale"),
            N("Add", [f"{p}g", "beta"], [y], name=f"{p}shift")]


LN_CONSTS = [_c("two", 2.0), _c("eps", 1e-5), _c("gamma", np.ones(32)), _c("beta", np.zeros(32))]


def _attention() -> onnx.ModelProto:
    """Single-head self-attention: Q/K/V projections, QK^T scaled, Softmax, weighted V, output
    projection (AttentionFusion and MatMulScaleFusion / FusedMatMul material)."""
    nodes = [N("MatMul", ["x", "wq"], ["q"], name="q_proj"), N("MatMul", ["x", "wk"], ["k"], name="k_proj"),
             N("MatMul", ["x", "wv"], ["v"], name="v_proj"),
             N("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 2, 1]),
             N("MatMul", ["q", "kt"], ["s"], name="scores"), N("Div", ["s", "scale"], ["ss"], name="scale_div"),
             N("Add", ["ss", "mask"], ["sm"], name="mask_add"),
             N("Softmax", ["sm"], ["p"], name="softmax", axis=-1), N("MatMul", ["p", "v"], ["o"], name="ctx"),
             N("MatMul", ["o", "wo"], ["ob"], name="o_proj"), N("Add", ["ob", "bo"], ["y"], name="o_bias")]
    inits = [_w("wq", 32, 32), _w("wk", 32, 32), _w("wv", 32, 32), _w("wo", 32, 32), _w("bo", 32),
             _c("scale", 5.656854), _c("mask", np.zeros((1, 8, 8)))]
    return _seq(nodes, inits)


def _qdq_conv() -> onnx.ModelProto:
    """Q -> DQ -> Conv(DQ weight) -> Q -> DQ: a CPU session folds it into QLinearConv (level 2)."""
    u8 = np.uint8
    nodes = [N("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
             N("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in"),
             N("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w"),
             N("Conv", ["xd", "wd"], ["c"], name="conv_q", pads=[1, 1, 1, 1]),
             N("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q_out"),
             N("DequantizeLinear", ["cq", "s", "z"], ["y"], name="dq_out")]
    inits = [_c("s", 0.05), _c("z", 128, u8), _c("ws", 0.01), _c("wz", 128, u8),
             numpy_helper.from_array(_rng.integers(100, 156, (16, 16, 3, 3)).astype(u8), "wq")]
    return _model(nodes, *_io(IMG, IMG), inits, 17)


def _qdq_matmul() -> onnx.ModelProto:
    u8 = np.uint8
    nodes = [N("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
             N("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in"),
             N("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w"),
             N("MatMul", ["xd", "wd"], ["m"], name="matmul_q"),
             N("QuantizeLinear", ["m", "s", "z"], ["mq"], name="q_out"),
             N("DequantizeLinear", ["mq", "s", "z"], ["y"], name="dq_out")]
    inits = [_c("s", 0.05), _c("z", 128, u8), _c("ws", 0.01), _c("wz", 128, u8),
             numpy_helper.from_array(_rng.integers(100, 156, (32, 32)).astype(u8), "wq")]
    return _model(nodes, *_io(SEQ, SEQ), inits, 17)


def _reshape_chain() -> onnx.ModelProto:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (ReshapeFusion) and Reshape -> Reshape."""
    i64 = np.int64
    nodes = [N("Shape", ["x"], ["shp"], name="shape"), N("Gather", ["shp", "i0"], ["b"], name="gather_b", axis=0),
             N("Unsqueeze", ["b", "ax0"], ["bu"], name="unsq_b"),
             N("Concat", ["bu", "rest"], ["target"], name="concat_shape", axis=0),
             N("Reshape", ["x", "target"], ["r1"], name="reshape1"),
             N("Reshape", ["r1", "back"], ["r2"], name="reshape2"), N("Relu", ["r2"], ["y"], name="relu")]
    inits = [_c("i0", 0, i64), _c("ax0", [0], i64), _c("rest", [8, 4, 8], i64), _c("back", [1, 8, 32], i64)]
    return _seq(nodes, inits)


def fusion_patterns() -> dict[str, onnx.ModelProto]:
    """Name -> model, one per rewrite of ONNX Runtime's level-1 (basic), level-2 (extended) and
    layout (all) optimizers that changes what a CPU-only session's graph holds. The same weights
    on every call."""
    global _rng
    _rng = np.random.default_rng(16)
    c = _c
    return {
        "hardswish": _model([N("HardSwish", ["x"], ["y"], name="hs")], *_io(IMG, IMG)),
        "conv_hardswish_conv": _img([_conv("conv0", "x", "c", "w0"), N("HardSwish", ["c"], ["h"], name="hs"),
                                     _conv("conv1", "h", "y", "w1")]),
        "hardsigmoid_mul": _img([N("HardSigmoid", ["x"], ["hs"], name="hsig", alpha=1 / 6, beta=0.5),
                                 N("Mul", ["x", "hs"], ["y"], name="hmul")]),
        "gelu_erf": _seq(_gelu_erf("x", "y", "g"), GELU_CONSTS),
        "gelu_op20": _seq([N("Gelu", ["x"], ["y"], name="gelu")], opset=20),
        "fast_gelu_tanh": _seq([N("Mul", ["x", "x"], ["x2"], name="sq"), N("Mul", ["x2", "x"], ["x3"], name="cube"),
                                N("Mul", ["x3", "k"], ["kx3"], name="kcube"), N("Add", ["x", "kx3"], ["in"], name="inner"),
                                N("Mul", ["in", "c"], ["ci"], name="scale_c"), N("Tanh", ["ci"], ["t"], name="tanh"),
                                N("Add", ["t", "one"], ["t1"], name="add1"), N("Mul", ["x", "t1"], ["xt"], name="mulx"),
                                N("Mul", ["xt", "half"], ["y"], name="half")],
                               [c("k", 0.044715), c("c", 0.7978846), c("one", 1.0), c("half", 0.5)]),
        "bias_gelu": _seq([N("MatMul", ["x", "w"], ["m"], name="fc"), N("Add", ["m", "b"], ["mb"], name="bias"),
                           *_gelu_erf("mb", "y", "g")], [_w("w", 32, 32), _w("b", 32), *GELU_CONSTS]),
        "quick_gelu": _seq([N("Mul", ["x", "k"], ["kx"], name="scale"), N("Sigmoid", ["kx"], ["s"], name="sig"),
                            N("Mul", ["x", "s"], ["y"], name="gate")], [c("k", 1.702)]),
        "layernorm_decomposed": _seq(_layernorm("x", "y", "ln"), LN_CONSTS),
        "layernorm_op": _seq([N("LayerNormalization", ["x", "gamma", "beta"], ["y"], name="ln", axis=-1)],
                             LN_CONSTS[2:]),
        "skip_layernorm": _seq([N("MatMul", ["x", "w"], ["m"], name="fc"), N("Add", ["m", "x"], ["s"], name="skip"),
                                N("LayerNormalization", ["s", "gamma", "beta"], ["y"], name="ln", axis=-1)],
                               [_w("w", 32, 32), *LN_CONSTS[2:]]),
        "rms_norm": _seq([N("Pow", ["x", "two"], ["sq"], name="pow"),
                          N("ReduceMean", ["sq"], ["ms"], name="mean", axes=[-1]),
                          N("Add", ["ms", "eps"], ["mse"], name="add_eps"), N("Sqrt", ["mse"], ["rms"], name="sqrt"),
                          N("Div", ["x", "rms"], ["n"], name="div"), N("Mul", ["n", "gamma"], ["y"], name="scale")],
                         LN_CONSTS[:3]),
        "attention": _attention(),
        "matmul_scale": _seq([N("MatMul", ["x", "w"], ["m"], name="mm"), N("Mul", ["m", "k"], ["y"], name="scale")],
                             [_w("w", 32, 32), c("k", 0.125)]),
        "matmul_transpose": _seq([N("Transpose", ["w"], ["wt"], name="wt", perm=[1, 0]),
                                  N("MatMul", ["x", "wt"], ["y"], name="mm")], [_w("w", 32, 32)]),
        "softplus": _seq([N("Softplus", ["x"], ["y"], name="softplus")]),
        "mish": _seq([N("Softplus", ["x"], ["sp"], name="softplus"), N("Tanh", ["sp"], ["t"], name="tanh"),
                      N("Mul", ["x", "t"], ["y"], name="mish_mul")]),
        "mish_exp_log": _seq([N("Exp", ["x"], ["e"], name="exp"), N("Add", ["e", "one"], ["e1"], name="add1"),
                              N("Log", ["e1"], ["sp"], name="log"), N("Tanh", ["sp"], ["t"], name="tanh"),
                              N("Mul", ["x", "t"], ["y"], name="mish_mul")], [c("one", 1.0)]),
        "conv_bn": _img([_conv("conv0", "x", "c", "w0"),
                         N("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn")],
                        [c("s", np.ones(16)), c("b", np.zeros(16)), c("m", np.zeros(16)), c("v", np.ones(16))]),
        "conv_add_relu": _img([_conv("conv0", "x", "c", "w0"), N("Add", ["c", "bias"], ["a"], name="add"),
                               N("Relu", ["a"], ["y"], name="relu")], [c("bias", np.zeros((16, 1, 1)))]),
        "conv_mul_clip": _img([_conv("conv0", "x", "c", "w0"), N("Mul", ["c", "k"], ["m"], name="mul"),
                               N("Clip", ["m", "lo", "hi"], ["y"], name="clip")],
                              [c("k", np.ones((16, 1, 1))), c("lo", 0.0), c("hi", 6.0)]),
        "conv_residual_add_relu": _img([_conv("conv0", "x", "c", "w0"), N("Add", ["c", "x"], ["a"], name="residual"),
                                        N("Relu", ["a"], ["y"], name="relu")]),
        "pad_conv": _img([N("Pad", ["x", "pads"], ["p"], name="pad"),
                          N("Conv", ["p", "w0"], ["y"], name="conv0")], [c("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)]),
        "matmul_add_gemm_relu": _model([N("MatMul", ["x", "w"], ["m"], name="mm"),
                                        N("Add", ["m", "b"], ["a"], name="add"), N("Relu", ["a"], ["y"], name="relu")],
                                       *_io([4, 32], [4, 32]), [_w("w", 32, 32), _w("b", 32)]),
        "gemm_transpose": _model([N("Transpose", ["x"], ["xt"], name="xt", perm=[1, 0]),
                                  N("Gemm", ["xt", "w"], ["y"], name="gemm")], *_io([32, 4], [4, 32]),
                                 [_w("w", 32, 32)]),
        "reshape_chain": _reshape_chain(),
        "transpose_pair_identity_dropout": _seq([N("Transpose", ["x"], ["t1"], name="t1", perm=[0, 2, 1]),
                                                 N("Transpose", ["t1"], ["t2"], name="t2", perm=[0, 2, 1]),
                                                 N("Identity", ["t2"], ["i"], name="ident"),
                                                 N("Dropout", ["i"], ["d"], name="dropout"),
                                                 N("Tanh", ["d"], ["y"], name="tanh")]),
        "div_const_to_mul": _seq([N("Div", ["x", "k"], ["d"], name="div"), N("Sigmoid", ["d"], ["y"], name="sig")],
                                 [c("k", 4.0)]),
        "not_where": _seq([N("Greater", ["x", "zero"], ["g"], name="greater"), N("Not", ["g"], ["ng"], name="not"),
                           N("Where", ["ng", "x", "zero"], ["y"], name="where")], [c("zero", 0.0)]),
        "qdq_conv": _qdq_conv(),
        "qdq_matmul": _qdq_matmul(),
    }


def dynamic_detector_model(heads: int = 6) -> onnx.ModelProto:
    """A small Mask R-CNN-like graph: a static backbone, then a data-dependent part.

    Conv -> Relu -> Conv -> Sigmoid scores; ``NonZero`` of the scores above a threshold picks the
    positions (a count known only at run time), ``Gather`` takes their features, ``heads`` elementwise
    box-head steps follow, and a ``Range`` over the number of picks (a limit computed from the data)
    numbers them. The HTP claims the backbone; NonZero and the Range are the root causes: every node
    after them fails with "Cannot get shape"."""
    i64 = np.int64
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], name="backbone_conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"], name="backbone_relu"),
        helper.make_node("Conv", ["r0", "ws"], ["s0"], name="score_conv"),
        helper.make_node("Sigmoid", ["s0"], ["s1"], name="score_sigmoid"),
        helper.make_node("Reshape", ["s1", "flat"], ["scores"], name="scores_flat"),
        helper.make_node("Greater", ["scores", "threshold"], ["keep"], name="keep"),
        helper.make_node("NonZero", ["keep"], ["picked"], name="nonzero"),
        helper.make_node("Squeeze", ["picked", "ax0"], ["idx"], name="picked_idx"),
        helper.make_node("Reshape", ["r0", "feat_shape"], ["f0"], name="features_flat"),
        helper.make_node("Transpose", ["f0"], ["f1"], name="features_t", perm=[1, 0]),
        helper.make_node("Gather", ["f1", "idx"], ["rois"], name="roi_gather", axis=0),
    ]
    prev = "rois"
    for i in range(heads):
        op = ("Mul", "Add")[i % 2]
        nodes.append(helper.make_node(op, [prev, f"k{i}"], [f"h{i}"], name=f"box_head{i}"))
        prev = f"h{i}"
    nodes += [
        helper.make_node("Shape", [prev], ["n_shape"], name="count_shape"),
        helper.make_node("Gather", ["n_shape", "zero"], ["n"], name="count", axis=0),
        helper.make_node("Range", ["zero", "n", "one"], ["ids"], name="roi_ids"),
        helper.make_node("Cast", ["ids"], ["idsf"], name="roi_ids_float", to=F),
        helper.make_node("Unsqueeze", ["idsf", "ax1"], ["idsc"], name="roi_ids_col"),
        helper.make_node("Add", [prev, "idsc"], ["y"], name="numbered"),
    ]
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.random((8, 3, 3, 3), dtype=np.float32) - 0.5, "w0"),
             numpy_helper.from_array(rng.random((1, 8, 1, 1), dtype=np.float32), "ws"),
             numpy_helper.from_array(np.array([256], i64), "flat"),
             numpy_helper.from_array(np.array([8, 256], i64), "feat_shape"),
             numpy_helper.from_array(np.array(0.5, np.float32), "threshold"),
             numpy_helper.from_array(np.array([0], i64), "ax0"), numpy_helper.from_array(np.array([1], i64), "ax1"),
             numpy_helper.from_array(np.array(0, i64), "zero"), numpy_helper.from_array(np.array(1, i64), "one"),
             *(numpy_helper.from_array(np.full((8,), 0.5 + i, np.float32), f"k{i}") for i in range(heads))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, 16, 16])],
                  [helper.make_tensor_value_info("y", F, ["n_picked", 8])], inits)


def folded_state_into_refused_op_model(op: str = "DynamicQuantizeLSTM", hidden: int = 8,
                                       features: int = 16) -> onnx.ModelProto:
    """An int8 CRNN's recurrent head as ddddocr exports it: the LSTM's initial states are
    ``ConstantOfShape`` of a shape computed from the input (``Shape`` -> ``Gather`` -> ``Abs`` ->
    ``Concat``: shape inference cannot follow the values, so the states' size looks unknown before
    the run), which ONNX Runtime folds into constants once the width is fixed, and the recurrent op itself
    (``op``, a ``com.microsoft`` quantized LSTM by default) is one the EP does not support at all.
    A removed ``ConstantOfShape`` must never be named the root cause of a shape failure, and the
    op-type refusal of the LSTM (whose name holds "Dynamic") is not a shape failure."""
    i64 = np.int64
    rng = np.random.default_rng(27)
    gates = 4 * hidden
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"], name="Shape_80"),
        helper.make_node("Gather", ["x_shape", "one"], ["batch"], name="Gather_82", axis=0),
        helper.make_node("Abs", ["batch"], ["batch_max"], name="Abs_83"),  # shape inference keeps no value: size unknown
        helper.make_node("Unsqueeze", ["batch_max", "ax0"], ["batch1"], name="Unsqueeze_84"),
        helper.make_node("Concat", ["dirs", "batch1", "hidden"], ["state_shape"], name="Concat_85", axis=0),
        helper.make_node("ConstantOfShape", ["state_shape"], ["h0"], name="ConstantOfShape_86",
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
    ]
    inits = [numpy_helper.from_array(np.array(1, i64), "one"), numpy_helper.from_array(np.array([0], i64), "ax0"),
             numpy_helper.from_array(np.array([1], i64), "dirs"), numpy_helper.from_array(np.array([hidden], i64), "hidden")]
    if op == "DynamicQuantizeLSTM":
        nodes.append(helper.make_node(
            op, ["x", "W", "R", "B", "", "h0", "h0", "", "W_scale", "W_zp", "R_scale", "R_zp"], ["Y"],
            name="DynamicQuantizeLSTM_87", domain="com.microsoft", hidden_size=hidden))
        inits += [numpy_helper.from_array(rng.integers(-100, 100, (1, features, gates)).astype(np.int8), "W"),
                  numpy_helper.from_array(rng.integers(-100, 100, (1, hidden, gates)).astype(np.int8), "R"),
                  numpy_helper.from_array(np.zeros((1, 2 * gates), np.float32), "B"),
                  numpy_helper.from_array(np.array([0.01], np.float32), "W_scale"),
                  numpy_helper.from_array(np.array([0], np.int8), "W_zp"),
                  numpy_helper.from_array(np.array([0.01], np.float32), "R_scale"),
                  numpy_helper.from_array(np.array([0], np.int8), "R_zp")]
    else:  # a plain LSTM, for contrast: the EP takes it, the folded states are no blocker
        nodes.append(helper.make_node(op, ["x", "W", "R", "B", "", "h0", "h0"], ["Y"], name=f"{op}_87",
                                      hidden_size=hidden))
        inits += [numpy_helper.from_array(rng.random((1, gates, features), dtype=np.float32) - 0.5, "W"),
                  numpy_helper.from_array(rng.random((1, gates, hidden), dtype=np.float32) - 0.5, "R"),
                  numpy_helper.from_array(np.zeros((1, 2 * gates), np.float32), "B")]
    nodes.append(helper.make_node("Relu", ["Y"], ["y"], name="Relu_88"))
    model = _model(nodes, [helper.make_tensor_value_info("x", F, ["image_width", 1, features])],
                   [helper.make_tensor_value_info("y", F, None)], inits)
    if op == "DynamicQuantizeLSTM":
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model
