"""Graphs whose node names carry no scopes (AI Hub's ``node_Conv_304``, Paddle's ``Constant#0``)
open in Model Explorer as blocks, not as one hairline of hundreds of nodes; graphs with scopes
keep theirs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dashboard.intake.reader import load_model
from dashboard.intake.samples import sample_path
from dashboard.render import model_explorer as me

DATA = Path(__file__).resolve().parent / "data"
UNSCOPED = [DATA / "aihub/resnet18.onnx", DATA / "aihub/mobilenet_v2.onnx", DATA / "real/rapidocr_ppocrv4_rec.onnx"]


def _drawn(path: Path) -> tuple[list[dict], object]:
    graph = load_model(str(path))
    data = json.loads(me.build_graph(graph, path.stem).to_json())
    return [n for n in data["graphs"][0]["nodes"] if n["id"].startswith("n")], graph


@pytest.mark.parametrize("path", UNSCOPED, ids=lambda p: p.name)
def test_an_unscoped_graph_opens_as_blocks_of_connected_runs(path):
    nodes, graph = _drawn(path)
    assert not any(me.namespace_of(n.name) for n in graph.nodes)  # the names group nothing
    assert all(n["namespace"] for n in nodes)  # every node is in a block
    top = Counter(n["namespace"].split("/")[0] for n in nodes)
    assert 2 <= len(top) <= me.PART_BLOCKS, top  # the first view: a few groups, not hundreds of nodes
    blocks = Counter(n["namespace"] for n in nodes)
    computing = Counter(n["namespace"] for n in nodes if n["label"] != "Constant")
    assert max(computing.values()) <= me.BLOCK_MAX
    # a block is a run of the topological order: its nodes are contiguous there (constants aside)
    order = [me.node_id(graph.nodes[i]) for i in graph.topo_order if graph.nodes[i].op_type != "Constant"]
    where = {n["id"]: n["namespace"] for n in nodes}
    runs = [where[i] for k, i in enumerate(order) if k == 0 or where[order[k - 1]] != where[i]]
    assert len(runs) == len(set(runs)) == len(computing), "a block is split across the order"
    assert all(": " in name for name in blocks)  # named by its ops (``block 03: Conv, Relu, Add``)


def test_a_scoped_graph_keeps_its_name_scopes():
    nodes, graph = _drawn(sample_path("cnn_classifier.onnx"))
    assert [n["namespace"] for n in nodes] == [me.namespace_of(graph.nodes[int(n["id"][1:])].name) for n in nodes]


def test_a_small_unscoped_graph_is_left_flat():
    assert me.block_namespaces(load_model(str(DATA / "real/ort_mul_1.onnx")).nodes) == {}
