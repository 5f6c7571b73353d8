"""Whole input shapes for inputs with unnamed dimensions: parsing, checking, and the copy of the
model the sessions get (made at the protobuf wire level, weights untouched)."""

from __future__ import annotations

import onnx
import partition_models as pm
import pytest

from dashboard.errors import UserError
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import parse_shapes, rewritten_model, unnamed_dynamic_inputs


def test_parse_shapes():
    assert parse_shapes(["input=1,576", "state = 2, 1, 128", "a=b=3x4"]) == {
        "input": (1, 576), "state": (2, 1, 128), "a=b": (3, 4)}  # the last '=' separates
    for bad, message in [("input", "is not NAME=D1,D2"), ("=1,2", "is not NAME"), ("x=1,,2", "positive integer"),
                         ("x=1,-2", "positive integer"), ("x=?", "positive integer")]:
        with pytest.raises(UserError, match=message):
            parse_shapes([bad])


def test_the_copy_differs_from_the_file_only_where_asked(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")  # one unnamed node, weights inline
    graph = load_model(path)
    names = [n.name for n in graph.nodes]
    copy = onnx.load_from_string(rewritten_model(path, {"x": (1, 3, 8, 8)}, names))
    expected = onnx.load(path)
    for proto, name in zip(expected.graph.node, names):
        proto.name = name
    assert [n.name for n in copy.graph.node] == names and "Relu#1" in names
    copy.graph.node.sort(key=lambda n: n.name)  # the name field moves to the end of each node
    expected.graph.node.sort(key=lambda n: n.name)
    assert copy == expected  # same weights, same everything else (the input already had this shape)


def test_a_shape_on_an_external_data_model_keeps_the_weights_where_they_are(tmp_path):
    model = pm.dynamic_model(batch=None)
    onnx.save(model, tmp_path / "big.onnx", save_as_external_data=True, location="big.onnx.data", size_threshold=0)
    graph = load_model(tmp_path / "big.onnx")
    assert unnamed_dynamic_inputs(graph) == ["x"] and unnamed_dynamic_inputs(graph, {"x": (2, 16)}) == []
    data = rewritten_model(tmp_path / "big.onnx", {"x": (2, 16)})
    assert len(data) < (tmp_path / "big.onnx.data").stat().st_size  # weights are not copied in
    copy = onnx.load_from_string(data)
    dims = [d.dim_value for d in copy.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 16]
    assert {e.value for t in copy.graph.initializer for e in t.external_data if e.key == "location"} == {
        "big.onnx.data"}


def test_only_the_graph_inputs_dimensions_are_settings(tmp_path):
    """Output dimensions are derived: an exporter's expression (``floor(height/2 - 1/2)``), a
    cache length (``past + 1``) or a generated name (``Softmax4195_dim_0``) is the model's to
    compute, never a field to fill in; a dimension an output shares with an input stays one."""
    from onnx import TensorProto, helper

    from dashboard.intake.shapes import default_dims, resolve_dims

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, "floor(height/2 - 1/2)",
                                                               "Softmax4195_dim_0"])
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="pool")
    model = helper.make_model(helper.make_graph([pool], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "pool.onnx"
    onnx.save(model, path)
    graph = load_model(path)
    assert list(default_dims(graph)) == ["batch", "height", "width"]
    assert set(resolve_dims(graph, {})) == {"batch", "height", "width"}
