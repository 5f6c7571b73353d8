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


def two_input_model() -> onnx.ModelProto:
    """``x`` [batch, 8] + ``y`` [?, 8]: a named dimension (a dims setting) and an unnamed one (a
    shapes setting), what a cell opened on the Partitions page must carry."""
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"], name="add0")], "two",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def fake_profile(cell, total: float):
    """A profile cell's row as ``run_cell`` makes it from a worker's profile, without a worker:
    ``total`` simulated HTP cycles, 3/4 on the input Transpose the EP inserts, the GPU failing as
    it does on this host."""
    from dashboard.profile.model import SIMULATOR_HARDWARE, BackendProfile, NodeCost, Profile, with_shares
    from dashboard.sweep.cells import profile_result

    backends = {"htp": BackendProfile(status="ok", hardware=SIMULATOR_HARDWARE, unit="cycles", total=total, runs=3),
                "gpu": BackendProfile(status="failed", hardware="no QNN GPU on this x86_64 host", unit="us",
                                      reason="the QNN GPU backend does not initialize here")}
    nodes = [NodeCost("Transpose", "Transpose", "htp", "cycles", total * 0.75, inserted=True),
             NodeCost("add0", "Add", "htp", "cycles", total * 0.25)]
    return profile_result(cell, Profile(model=cell.model, runs=3, backends=backends,
                                        nodes=with_shares(nodes, backends)))
