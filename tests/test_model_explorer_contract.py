"""The project's copy of Model Explorer's JSON contract (``dashboard.render.model_explorer``)
against the pinned package (``ai-edge-model-explorer`` in requirements-nodeps.txt).

The copy exists because importing ``model_explorer`` runs its package ``__init__``, which imports
its server (Flask, ``portpicker``: not installed, the package is installed ``--no-deps`` for its
web app only). Its ``graph_builder`` and ``node_data_builder`` modules are plain dataclasses that
import only the standard library and their siblings, so they are loaded here from the installed
files under a private package name, without that ``__init__``: the real classes, not a parse of
their source. Every field of the copy must exist in the package, every required field of the
package must be in the copy, and the copy's types must be ones the package accepts.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import sys
import types
import typing
from pathlib import Path

import pytest

from dashboard.render import model_explorer as ours

ROOT = Path(__file__).resolve().parent.parent
PRIVATE = "_pinned_model_explorer"

# (class, field) -> why the copy's type differs from the package's annotation on purpose.
DELIBERATE = {
    ("NodeDataResult", "value"): "the package annotates numbers, its web app also colours string labels, "
                                 "which the overlays use (one colour per label)",
}


def pinned_version() -> str:
    for line in (ROOT / "requirements-nodeps.txt").read_text().splitlines():
        if line.startswith("ai-edge-model-explorer=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError("requirements-nodeps.txt pins no ai-edge-model-explorer")


@pytest.fixture(scope="module")
def theirs() -> dict[str, type]:
    """The package's dataclasses by name, from its ``graph_builder`` and ``node_data_builder``."""
    spec = importlib.util.find_spec("model_explorer")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("ai-edge-model-explorer is not installed (make test installs requirements-nodeps.txt)")
    assert importlib.metadata.version("ai-edge-model-explorer") == pinned_version()
    folder = Path(next(iter(spec.submodule_search_locations)))
    package = types.ModuleType(PRIVATE)
    package.__path__ = [str(folder)]
    saved = {name: module for name, module in sys.modules.items() if name == PRIVATE or name.startswith(PRIVATE + ".")}
    sys.modules[PRIVATE] = package
    try:
        classes: dict[str, type] = {}
        for name in ("graph_builder", "node_data_builder"):
            module = importlib.import_module(f"{PRIVATE}.{name}")
            for value in vars(module).values():
                if dataclasses.is_dataclass(value) and value.__module__ == module.__name__:
                    classes[value.__name__] = value
        for cls in classes.values():  # resolve the string annotations while the modules are importable
            cls.__hints__ = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        return classes
    finally:
        for name in [n for n in sys.modules if n == PRIVATE or n.startswith(PRIVATE + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)


OURS = [cls for cls in vars(ours).values() if dataclasses.is_dataclass(cls) and cls.__module__ == ours.__name__]


def test_the_copy_is_the_json_contract_it_says_it_is():
    assert {cls.__name__ for cls in OURS} == {"KeyValue", "IncomingEdge", "MetadataItem", "GraphNode", "Graph",
                                              "GraphCollection", "NodeDataResult", "GraphNodeData"}


def accepts(theirs_type, our_type) -> bool:
    """Whether a value of ``our_type`` (the copy's annotation) is one ``theirs_type`` allows; nested
    dataclasses match by name (the copy's ``GraphNode`` stands for the package's)."""
    if dataclasses.is_dataclass(our_type) and dataclasses.is_dataclass(theirs_type):
        return our_type.__name__ == theirs_type.__name__
    if typing.get_origin(our_type) in (typing.Union, types.UnionType):
        return all(accepts(theirs_type, arm) for arm in typing.get_args(our_type))
    if typing.get_origin(theirs_type) in (typing.Union, types.UnionType):
        return any(accepts(arm, our_type) for arm in typing.get_args(theirs_type))
    if typing.get_origin(our_type) is not None or typing.get_origin(theirs_type) is not None:
        return (typing.get_origin(our_type) is typing.get_origin(theirs_type)
                and len(typing.get_args(our_type)) == len(typing.get_args(theirs_type))
                and all(accepts(t, o) for t, o in zip(typing.get_args(theirs_type), typing.get_args(our_type))))
    return our_type is theirs_type


@pytest.mark.parametrize("cls", OURS, ids=lambda cls: cls.__name__)
def test_each_field_of_the_copy_is_the_packages_with_a_type_it_accepts(cls, theirs):
    assert cls.__name__ in theirs, f"the pinned Model Explorer has no {cls.__name__}"
    their_cls = theirs[cls.__name__]
    their_fields = {f.name: f for f in dataclasses.fields(their_cls)}
    our_hints = typing.get_type_hints(cls, vars(ours))
    for f in dataclasses.fields(cls):
        assert f.name in their_fields, f"{cls.__name__}.{f.name} is not a field of Model Explorer's {cls.__name__}"
        their_type, our_type = their_cls.__hints__[f.name], our_hints[f.name]
        if (cls.__name__, f.name) in DELIBERATE:
            assert not accepts(their_type, our_type), f"{cls.__name__}.{f.name} no longer differs: drop it from DELIBERATE"
            continue
        assert accepts(their_type, our_type), f"{cls.__name__}.{f.name}: ours {our_type}, Model Explorer's {their_type}"
    ours_names = {f.name for f in dataclasses.fields(cls)}
    required = {name for name, f in their_fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert required <= ours_names, f"{cls.__name__} lacks Model Explorer's required {sorted(required - ours_names)}"


def test_the_json_the_copy_writes_builds_the_packages_own_classes(theirs):
    """What the viewer is sent, read back into the package's dataclasses: a key the package does
    not know fails here (an unexpected keyword), as it would be ignored or refused by the viewer."""
    collection = ours.GraphCollection("m", [ours.Graph(ours.GRAPH_ID, [
        ours.GraphNode("n0", "MatMul", "model/layers.0", [ours.KeyValue("name", "/model/layers.0/MatMul")],
                       [ours.IncomingEdge("input_0")], [ours.MetadataItem("0", [ours.KeyValue("shape", "[1, 4]")])]),
    ])])

    def build(name: str, data: dict):
        nested = {"graphs": "Graph", "nodes": "GraphNode", "attrs": "KeyValue", "incomingEdges": "IncomingEdge",
                  "outputsMetadata": "MetadataItem"}
        return theirs[name](**{k: [build(nested[k], item) for item in v] if k in nested else v for k, v in data.items()})

    built = build("GraphCollection", json.loads(collection.to_json()))
    assert built.graphs[0].nodes[0].incomingEdges[0].sourceNodeId == "input_0"
    assert built.graphs[0].nodes[0].outputsMetadata[0].attrs[0].value == "[1, 4]"

    overlay = ours.GraphNodeData({"n0": ours.NodeDataResult("htp", "#2ca02c"), "n1": ours.NodeDataResult("cpu")}, "plan")
    data = json.loads(overlay.to_json())[ours.GRAPH_ID]
    results = {k: theirs["NodeDataResult"](**v) for k, v in data.pop("results").items()}
    their_overlay = theirs["GraphNodeData"](results=results, **data)
    assert their_overlay.results["n0"].bgColor == "#2ca02c" and their_overlay.results["n1"].bgColor is None
    assert their_overlay.name == "plan" and their_overlay.hideInAggregatedStatsTable is True
