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
