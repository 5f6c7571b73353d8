"""Small float models for the accuracy and quantization tests, built with ``onnx.helper`` and seeded
numpy, and quantized in the tests by ONNX Runtime's own quantizer (no hand-made QDQ graphs).

- ``outlier_model``: a CNN whose third tensor (``spike``, the output of an ``Add``) has one huge
  value: per-tensor u8 stretches that tensor's range over it, so that layer's own error breaks and
  no other's does (the layerwise debugger must name it first);
- ``erf_model``: a CNN with an ``Erf`` in the middle, which QNN has no builder for: its QDQ model
  does not run whole on the HTP (the blocker);
- ``samples``: image-like inputs for either.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = (1, 3, 16, 16)
CHANNELS = 8
CLASSES = 10
SPIKE = 400.0


def _w(rng, name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _conv(name: str, x: str, out: str, weight: str, bias: str) -> onnx.NodeProto:
    return helper.make_node("Conv", [x, weight, bias], [out], name=name, pads=[1, 1, 1, 1], kernel_shape=[3, 3])


def _model(nodes, inits, name: str) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(SHAPE))],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="qnn-backend-lab-tests")
    model.ir_version = 8
    return model


def _head(rng, x: str) -> tuple[list, list]:
    nodes = [helper.make_node("GlobalAveragePool", [x], ["pooled"], name="pool"),
             helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
             helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1)]
    return nodes, [_w(rng, "fc.w", CLASSES, CHANNELS), _w(rng, "fc.b", CLASSES, scale=0.1)]


def outlier_model(seed: int = 3) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    spike = np.zeros((1, CHANNELS, SHAPE[2], SHAPE[3]), np.float32)
    spike[0, 0, 0, 0] = SPIKE  # one value: the u8 range of `spike` is stretched over it
    head, head_inits = _head(rng, "c3")
    nodes = [_conv("conv1", "image", "c1", "w1", "b1"), helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             _conv("conv2", "r1", "c2", "w2", "b2"), helper.make_node("Add", ["c2", "bump"], ["spike"], name="add_spike"),
             _conv("conv3", "spike", "c3", "w3", "b3"), *head]
    inits = [_w(rng, "w1", CHANNELS, 3, 3, 3), _w(rng, "b1", CHANNELS, scale=0.1),
             _w(rng, "w2", CHANNELS, CHANNELS, 3, 3, scale=0.15), _w(rng, "b2", CHANNELS, scale=0.1),
             numpy_helper.from_array(spike, "bump"),
             _w(rng, "w3", CHANNELS, CHANNELS, 3, 3, scale=0.15), _w(rng, "b3", CHANNELS, scale=0.1), *head_inits]
    return _model(nodes, inits, "outlier")


def erf_model(seed: int = 5) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    head, head_inits = _head(rng, "c2")
    nodes = [_conv("conv1", "image", "c1", "w1", "b1"), helper.make_node("Erf", ["c1"], ["e1"], name="erf1"),
             _conv("conv2", "e1", "c2", "w2", "b2"), *head]
    inits = [_w(rng, "w1", CHANNELS, 3, 3, 3), _w(rng, "b1", CHANNELS, scale=0.1),
             _w(rng, "w2", CHANNELS, CHANNELS, 3, 3, scale=0.15), _w(rng, "b2", CHANNELS, scale=0.1), *head_inits]
    return _model(nodes, inits, "erf")


def samples(count: int = 6, seed: int = 11) -> np.ndarray:
    """Image-like samples, stacked on a leading axis: smooth positive fields, as pixels are."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, (count, 1, SHAPE[1], 4, 4)).astype(np.float32)
    return np.repeat(np.repeat(base, 4, axis=3), 4, axis=4) + rng.normal(0, 0.05, (count, *SHAPE)).astype(np.float32)


def save(model: onnx.ModelProto, folder: Path, name: str) -> Path:
    path = Path(folder) / name
    onnx.save(model, path)
    return path


def save_samples(folder: Path, count: int = 6, name: str = "data.npz") -> Path:
    path = Path(folder) / name
    np.savez(path, image=samples(count))
    return path
