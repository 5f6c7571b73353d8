"""Mapping what the runtime reports back to model nodes, on hand-made graphs (no session)."""

from __future__ import annotations

from onnx import TensorProto, helper

from dashboard.intake.reader import load_model
from dashboard.partition.measure import (OptGraph, OptNode, Placement, measure, model_verdicts, opt_verdicts,
                                         place_model_nodes, resolve_ep_name)

QNN, CPU = "QNNExecutionProvider", "CPUExecutionProvider"


def opt(*nodes: OptNode, initializers=()) -> OptGraph:
    return OptGraph({n.name: n for n in nodes}, set(initializers))


def test_layout_suffixes_resolve_to_the_model_node_but_inserted_nodes_do_not():
    graph = opt(OptNode("conv0", "Conv", "", ("x",), ("c",)), OptNode("Transpose", "Transpose", "", ("c",), ("t",)))
    assert resolve_ep_name("conv0_token_3", "Conv", graph) == "conv0"
    assert resolve_ep_name("conv0_token_3_token_9", "Conv", graph) == "conv0"
    assert resolve_ep_name("Transpose", "Transpose", graph) == "Transpose"  # a model node that is a Transpose
    assert resolve_ep_name("Transpose_token_7", "Transpose", graph) == "Transpose"
    assert resolve_ep_name("conv0_token_3", "Relu", graph) is None  # same stem, other op: not this node
    assert resolve_ep_name("gemm_input_reshape", "Reshape", graph) is None


def test_placement_fused_by_name_by_tensor_and_removed(tmp_path):
    """MatMul+Add became ``mm/MatMulAddFusion`` (which now produces the Add's output), the Mul was
    folded into the kept node before it (as BatchNormalization into Conv: the kept node now
    produces the Mul's output), the Identity was eliminated and the Shape folded into a constant."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["c"], name="conv"),
             helper.make_node("Mul", ["c", "k"], ["d"], name="scale"),
             helper.make_node("Identity", ["d"], ["i"], name="ident"),
             helper.make_node("Shape", ["i"], ["shp"], name="shape"),
             helper.make_node("Reshape", ["i", "shp"], ["y"], name="reshape")]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.0] * 16),
             helper.make_tensor("b", TensorProto.FLOAT, [4], [0.0] * 4),
             helper.make_tensor("k", TensorProto.FLOAT, [4], [1.0] * 4)]
    onnx_graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    graph = load_model(path)
    optimized = opt(OptNode("mm/MatMulAddFusion", "Gemm", "", ("x", "w", "b"), ("a",)),
                    OptNode("conv", "Relu", "", ("a",), ("d",)),
                    OptNode("reshape", "Reshape", "", ("d", "shp"), ("y",)), initializers=("w", "b", "shp"))
    place = place_model_nodes(graph, optimized)
    assert (place["mm"].kind, place["mm"].target) == ("fused", "mm/MatMulAddFusion")     # ORT's naming
    assert (place["add"].kind, place["add"].target) == ("fused", "mm/MatMulAddFusion")   # produces its output
    assert (place["scale"].kind, place["scale"].target) == ("fused", "conv")             # absorbed by a kept node
    assert place["conv"].kind == place["reshape"].kind == "same"
    assert place["ident"].kind == "removed"   # its consumer now reads its input
    assert place["shape"].kind == "removed"   # folded: its output is an initializer

    assignment = [(QNN, [("mm/MatMulAddFusion", "Gemm"), ("conv_token_2", "Relu")]), (CPU, [("reshape", "Reshape")])]
    trace = {"unsupported_nodes": [{"node_name": "reshape", "op_type": "Reshape", "reason": "Cannot get shape"}],
             "subgraph_traces": [{"op_mappings": [
                 {"dst_qnn_op_type": "FullyConnected", "node_group_type": "OrtNodeUnit",
                  "sources": [{"name": "mm/MatMulAddFusion", "type": "OP"}]},
                 {"dst_qnn_op_type": "Relu", "node_group_type": "OrtNodeUnit",
                  "sources": [{"name": "conv_token_2", "type": "OP"}]}]}]}
    m = measure(optimized, assignment, trace)
    assert m.claimed == {"mm/MatMulAddFusion", "conv"} and m.qnn_subgraphs == 1
    verdicts = model_verdicts(graph, place, opt_verdicts(optimized, m))
    assert verdicts["mm"].supported and verdicts["mm"].status == "fused" and verdicts["mm"].qnn_op == "FullyConnected"
    assert verdicts["mm"].fused_into == "mm/MatMulAddFusion" and verdicts["mm"].reason is None
    assert verdicts["conv"].status == "claimed" and verdicts["conv"].qnn_op == "Relu"
    assert verdicts["scale"].supported and verdicts["scale"].fused_into == "conv"
    assert not verdicts["reshape"].supported and verdicts["reshape"].reason == "Cannot get shape"
    assert verdicts["ident"].status == "removed" and not verdicts["ident"].supported


def test_nodes_in_no_subgraph_were_removed_while_partitioning():
    optimized = opt(OptNode("t0", "Transpose", "", ("x",), ("a",)), OptNode("r0", "Relu", "", ("a",), ("y",)))
    m = measure(optimized, [(QNN, [("r0", "Relu"), ("Transpose_token_4", "Transpose")])], None)
    verdicts = opt_verdicts(optimized, m)
    assert verdicts["r0"].supported
    assert verdicts["t0"].status == "removed" and "transpose optimizer" in verdicts["t0"].reason
    assert m.added == [{"ep": QNN, "op_type": "Transpose", "count": 1, "names": ["Transpose_token_4"]}]


def test_a_node_the_ep_reports_as_itself_keeps_its_verdict_whatever_the_cpu_path_made_of_it(tmp_path):
    """The CPU reference decomposed HardSwish into HardSigmoid + Mul; the QNN EP took it whole and
    reported it by name (issue 16). Its verdict is the EP's, not that of the Mul nobody ran."""
    nodes = [helper.make_node("HardSwish", ["x"], ["h"], name="hs"), helper.make_node("Relu", ["h"], ["y"], name="relu")]
    onnx_graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "hs.onnx"
    path.write_bytes(helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    graph = load_model(path)
    optimized = opt(OptNode("HardSigmoid#0", "HardSigmoid", "", ("x",), ("s",)),
                    OptNode("Mul#1", "Mul", "", ("x", "s"), ("h",)), OptNode("relu", "Relu", "", ("h",), ("y",)))
    place = place_model_nodes(graph, optimized)
    assert place["hs"] == Placement("fused", "Mul#1")  # what the reference graph alone says
    m = measure(optimized, [(QNN, [("hs", "HardSwish"), ("relu", "Relu")])], None, graph)
    verdicts = model_verdicts(graph, place, opt_verdicts(optimized, m), m.reported)
    assert verdicts["hs"].status == "claimed" and verdicts["hs"].supported and verdicts["hs"].fused_into is None
    assert m.added == []  # a model node is never counted as one the EP inserted
    refused = measure(optimized, [(CPU, [("hs", "HardSwish")]), (QNN, [("relu", "Relu")])],
                      {"unsupported_nodes": [{"node_name": "hs", "op_type": "HardSwish", "reason": "no builder"}]},
                      graph)
    verdicts = model_verdicts(graph, place, opt_verdicts(optimized, refused), refused.reported)
    assert verdicts["hs"].status == "rejected" and verdicts["hs"].reason == "no builder"
    # Without the EP's word on it, the reference graph still explains the node.
    silent = measure(optimized, [(QNN, [("Mul#1", "Mul"), ("relu", "Relu")])], None, graph)
    verdicts = model_verdicts(graph, place, opt_verdicts(optimized, silent), silent.reported)
    assert verdicts["hs"].status == "fused" and verdicts["hs"].supported and verdicts["hs"].fused_into == "Mul#1"
