"""Migration plans on hand-made graphs: segments, boundary tensors and byte counts checked exactly."""

from __future__ import annotations

import random

from dashboard.intake.shapes import TensorShape
from dashboard.partition.plans import (INTERSECTION, SEGMENTED, PlanGraph, PlanNode, affinity_order, build_plan,
                                       build_plans)


def f32(*shape) -> TensorShape:
    return TensorShape("float32", tuple(shape))


def diamond() -> tuple[PlanGraph, dict[str, str]]:
    """x -> a -> t1; t1 -> b -> t2 -> c -> t3; t1 -> d -> t4 -> r (removed Identity) -> t6;
    (t3, t6) -> e -> y. ``a`` also reads the initializer ``w``."""
    nodes = [
        PlanNode("a", ("x", "w"), ("t1",)),
        PlanNode("b", ("t1",), ("t2",)),
        PlanNode("c", ("t2",), ("t3",)),
        PlanNode("d", ("t1",), ("t4",)),
        PlanNode("r", ("t4",), ("t6",)),
        PlanNode("e", ("t3", "t6"), ("y",)),
    ]
    tensors = {"x": f32(1, 4), "w": f32(4, 4), "t1": f32(1, 4), "t2": f32(1, 8), "t3": f32(1, 8),
               "t4": f32(1, 2), "t6": f32(1, 2), "y": f32(1, 10)}
    graph = PlanGraph(nodes, graph_inputs={"x"}, graph_outputs={"y"}, constants={"w"}, tensors=tensors)
    classes = {"a": "both", "b": "gpu_only", "c": "both", "d": "neither", "r": "removed", "e": "both"}
    return graph, classes


def refs(items) -> list[tuple[str, int | None, list[str]]]:
    return [(r.name, r.bytes, r.peer) for r in items]


def test_intersection_plan_segments_and_bytes():
    graph, classes = diamond()
    plan = build_plan(INTERSECTION, graph, classes)
    assert [(s.backend, s.nodes) for s in plan.segments] == [
        ("migrating", ["a"]), ("cpu", ["b", "d"]), ("migrating", ["c", "e"])]
    s0, s1, s2 = plan.segments
    assert refs(s0.inputs) == [("x", 16, ["host"])]            # the initializer w is not a boundary
    assert refs(s0.outputs) == [("t1", 16, ["1"])]
    assert refs(s1.inputs) == [("t1", 16, ["0"])]
    # d's output reaches e through the removed node r: the producing side hands over t4
    assert refs(s1.outputs) == [("t2", 32, ["2"]), ("t4", 8, ["2"])]
    assert refs(s2.inputs) == [("t2", 32, ["1"]), ("t6", 8, ["1"])]
    assert refs(s2.outputs) == [("y", 40, ["host"])]
    assert [s.boundary_bytes for s in plan.segments] == [32, 56, 80]
    assert plan.transfer_bytes == 16 + 16 + 32 + 8 + 40  # x, t1, t2, t6, y once each
    assert plan.bytes_complete and plan.unknown_tensors == 0


def test_segmented_plan_keeps_gpu_only_nodes_in_their_own_segment():
    graph, classes = diamond()
    plan = build_plan(SEGMENTED, graph, classes)
    assert [(s.backend, s.nodes) for s in plan.segments] == [
        ("migrating", ["a"]), ("gpu", ["b"]), ("migrating", ["c"]), ("cpu", ["d"]), ("migrating", ["e"])]
    assert plan.segments_by_backend == {"migrating": 3, "gpu": 1, "cpu": 1}
    assert refs(plan.segments[0].outputs) == [("t1", 16, ["1", "3"])]
    assert refs(plan.segments[4].inputs) == [("t3", 32, ["2"]), ("t6", 8, ["3"])]
    assert all("r" not in s.nodes for s in plan.segments)  # removed nodes run nowhere


def test_unknown_sizes_are_listed_but_not_added():
    graph, classes = diamond()
    graph.tensors["t2"] = TensorShape("float32", ("n", 8))  # a dimension nobody fixed
    plan = build_plan(INTERSECTION, graph, classes)
    s1 = plan.segments[1]
    assert refs(s1.outputs)[0] == ("t2", None, ["2"])
    assert s1.boundary_bytes == 16 + 8 and s1.unknown_tensors == 1
    assert not plan.bytes_complete and plan.unknown_tensors == 1
    assert plan.transfer_bytes == 16 + 16 + 8 + 40


def test_all_both_is_one_migrating_segment_with_graph_io_only():
    graph, classes = diamond()
    classes = {n: ("removed" if n == "r" else "both") for n in classes}
    plans = build_plans(graph, classes)
    for plan in plans.values():
        assert len(plan.segments) == 1 and plan.segments[0].backend == "migrating"
        assert refs(plan.segments[0].inputs) == [("x", 16, ["host"])]
        assert refs(plan.segments[0].outputs) == [("y", 40, ["host"])]


def test_constant_only_inputs_through_removed_nodes_are_not_boundaries():
    nodes = [PlanNode("fold", ("w",), ("k",)), PlanNode("use", ("x", "k"), ("y",))]
    graph = PlanGraph(nodes, {"x"}, {"y"}, {"w"}, {"x": f32(2), "k": f32(2), "y": f32(2), "w": f32(2)})
    plan = build_plan(SEGMENTED, graph, {"fold": "removed", "use": "htp_only"})
    assert [(s.backend, s.nodes) for s in plan.segments] == [("htp", ["use"])]
    assert refs(plan.segments[0].inputs) == [("x", 8, ["host"])]


def test_affinity_order_is_topological_and_never_worse_than_file_order():
    rng = random.Random(7)
    for trial in range(30):
        count = rng.randint(5, 40)
        nodes = []
        for i in range(count):
            sources = rng.sample(range(i), k=min(i, rng.randint(0, 3)))
            nodes.append(PlanNode(f"n{i}", tuple(f"t{j}" for j in sources) or ("x",), (f"t{i}",)))
        graph = PlanGraph(nodes, {"x"}, {f"t{count - 1}"}, set(), {})
        label = {n.name: rng.choice(["migrating", "cpu", "gpu"]) for n in nodes}
        order = affinity_order(graph, label)
        position = {name: i for i, name in enumerate(order)}
        assert sorted(order) == sorted(label)
        for node in nodes:
            for tensor in node.inputs:
                if tensor != "x":
                    assert position[f"n{tensor[1:]}"] < position[node.name]
        runs = lambda seq: sum(1 for i, n in enumerate(seq) if i == 0 or label[seq[i - 1]] != label[n])  # noqa: E731
        assert runs(order) <= runs([n.name for n in nodes])
