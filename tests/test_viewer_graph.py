"""Model Explorer's JSON built from the weight-free reader, and the partition overlays built from a
real partition report (HTP simulator; GPU predicted), checked against the ONNX file read with onnx."""

from __future__ import annotations

import json

import onnx
import partition_models as pm
import pytest

from dashboard.intake.reader import load_model
from dashboard.intake.samples import sample_path
from dashboard.render import model_explorer as me
from dashboard.render.partition_graph import CLASS_COLORS


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def rejects(tmp_path_factory):
    """The rejects model (Erf and Mod(fmod=1) refused by the HTP), its graph and its real report."""
    from dashboard.partition.analysis import PartitionOptions, analyze

    folder = tmp_path_factory.mktemp("rejects")
    path = pm.save(pm.rejects_model(), folder, "rejects")
    return path, load_model(str(path)), analyze(path, PartitionOptions(fp16=True))


def nodes_of(collection: me.GraphCollection) -> dict[str, dict]:
    data = json.loads(collection.to_json())
    [graph] = data["graphs"]
    return {n["id"]: n for n in graph["nodes"]}


def attrs(node: dict) -> dict[str, str]:
    return {a["key"]: a["value"] for a in node["attrs"]}


def test_graph_has_every_node_edge_and_name_scope_of_the_file():
    path = sample_path("llm_decoder_kv.onnx")
    proto = onnx.load(path, load_external_data=False)
    graph = load_model(str(path))
    nodes = nodes_of(me.build_graph(graph, "decoder"))
    ops = {attrs(n)["name"]: n for i, n in nodes.items() if i.startswith("n")}
    assert set(ops) == {n.name for n in proto.graph.node}
    producer = {t: (n.name, k) for n in proto.graph.node for k, t in enumerate(n.output)}
    inputs = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
    for onnx_node in proto.graph.node:
        drawn = ops[onnx_node.name]
        assert drawn["label"] == onnx_node.op_type
        assert drawn["namespace"] == "/".join(onnx_node.name.strip("/").split("/")[:-1])
        expected = []
        for slot, tensor in enumerate(onnx_node.input):
            if tensor in producer:
                src, out = producer[tensor]
                expected.append((attrs(ops[src])["name"], str(out), str(slot)))
            elif tensor in inputs:
                expected.append((tensor, "0", str(slot)))
        got = [(attrs(nodes[e["sourceNodeId"]]).get("name") or attrs(nodes[e["sourceNodeId"]])["graph input"],
                e["sourceNodeOutputId"], e["targetNodeInputId"]) for e in drawn["incomingEdges"]]
        assert got == expected, onnx_node.name
    # more than IO_GROUP_MIN inputs (a KV cache) sit in one group instead of one wide row; 5 outputs do not
    graph_inputs = [n for i, n in nodes.items() if i.startswith("in")]
    assert [attrs(n)["graph input"] for n in graph_inputs] == inputs
    assert len(inputs) > me.IO_GROUP_MIN and {n["namespace"] for n in graph_inputs} == {"inputs"}
    graph_outputs = [n for i, n in nodes.items() if i.startswith("out")]
    assert [attrs(n)["graph output"] for n in graph_outputs] == [o.name for o in proto.graph.output]
    assert len(graph_outputs) <= me.IO_GROUP_MIN and {n["namespace"] for n in graph_outputs} == {""}


def test_node_name_maps_picked_ids_back():
    graph = load_model(str(sample_path("cnn_classifier.onnx")))
    first = graph.nodes[0]
    assert me.node_name(graph, me.node_id(first)) == first.name
    for garbage in (None, "", "in0", "out0", "n", "n99999", "nx", "transformer/h.0"):
        assert me.node_name(graph, garbage) is None


def test_overlays_colour_classes_verdicts_and_plans(rejects):
    _path, graph, report = rejects
    ids = {n.name: me.node_id(n) for n in graph.nodes}
    overlays = me.partition_overlays(graph, report)
    assert list(overlays) == ["class", "HTP (measured)", "GPU (predicted)", "intersection plan", "segmented plan"]
    classes = json.loads(overlays["class"].to_json())[me.GRAPH_ID]["results"]
    assert classes[ids["erf0"]] == {"value": "neither (CPU)", "bgColor": CLASS_COLORS["neither"]}
    assert classes[ids["mod0"]]["value"] == "neither (CPU)"
    assert classes[ids["sig0"]] == {"value": "both (GPU and HTP)", "bgColor": CLASS_COLORS["both"]}
    htp = json.loads(overlays["HTP (measured)"].to_json())[me.GRAPH_ID]["results"]
    assert htp[ids["erf0"]]["value"] == "refused" and htp[ids["sig0"]]["value"] == "claimed"
    plan = json.loads(overlays["segmented plan"].to_json())[me.GRAPH_ID]["results"]
    assert set(plan) == {ids[n] for n in report.node_order}
    assert plan[ids["erf0"]]["value"] == "CPU"


def test_node_attributes_carry_reason_qnn_op_and_measured_or_predicted(rejects):
    _path, graph, report = rejects
    nodes = nodes_of(me.build_graph(graph, "rejects", me.partition_attrs(report), report.shapes))
    by_name = {attrs(n).get("name"): attrs(n) for n in nodes.values()}
    erf = by_name["erf0"]
    assert erf["class"] == "neither (CPU)"
    assert erf["HTP verdict"] == "refused (measured)"
    assert "Operators of type `Erf` are not supported" in erf["HTP reason"]
    assert erf["GPU verdict"].endswith("(predicted)")
    sig = by_name["sig0"]
    assert sig["HTP verdict"] == "claimed (measured)" and sig["HTP QNN op"]
    assert sig["segmented plan"].startswith("segment ")
    conv_outputs = next(n for n in nodes.values() if attrs(n).get("name") == "conv0")["outputsMetadata"]
    assert {"key": "tensor_name", "value": "c"} in conv_outputs[0]["attrs"]


def test_hostile_names_stay_data(hostile_model):
    """Names holding HTML and script go into the JSON as strings (the viewer shows them as text)."""
    import zoo

    graph = load_model(str(hostile_model))
    text = me.build_graph(graph, "<b>title</b>").to_json()
    data = json.loads(text)
    names = [attrs(n)["name"] for n in data["graphs"][0]["nodes"] if n["id"].startswith("n")]
    assert names == [n.name for n in graph.nodes]
    assert set(zoo.HOSTILE_NAMES) - {""} <= {n.onnx_name for n in graph.nodes}
