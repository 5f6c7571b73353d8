"""Small models and specs for the sweep tests: tiny graphs written to a folder, and a spec beside them."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper


def chain_model(ops: tuple[str, ...] = ("Add", "Mul", "Tanh", "Sub"), width: int = 8, seed: int = 0
                ) -> onnx.ModelProto:
    """A chain of unary/binary elementwise nodes named ``<op>0``; ``seed`` changes a constant, so
    models of the same ops have different content (and digests). The HTP simulator claims Add,
    Mul, Tanh and Sub and refuses Erf ("Operators of type `Erf` are not supported")."""
    nodes, x = [], "x"
    for i, op in enumerate(ops):
        out = f"t{i}"
        inputs = [x] if op in ("Tanh", "Erf", "Relu", "Sigmoid") else [x, "k"]
        nodes.append(helper.make_node(op, inputs, [out], name=f"{op.lower()}{i}"))
        x = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor("k", TensorProto.FLOAT, [1], [1.0 + seed])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def write_models(folder: Path, count: int, ops: tuple[str, ...] = ("Add", "Mul", "Tanh", "Sub")) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"model_{i:03d}.onnx"
        onnx.save(chain_model(ops, seed=i), path)
        paths.append(path)
    return paths


def write_spec(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
