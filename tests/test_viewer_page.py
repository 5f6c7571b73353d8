"""The Model Explorer graph on the Partitions page under AppTest (real worker, HTP simulator): the
component gets the graph and the overlays, the colour control puts the chosen overlay first, and a
node picked in the viewer becomes the page's selected node."""

from __future__ import annotations

import json

import partition_models as pm
import pytest
from page_jobs import node_picker, settle
from streamlit.testing.v1 import AppTest

from dashboard.intake.reader import load_model
from dashboard.render import model_explorer as me

TIMEOUT = 300
SCRIPT = """
from dashboard.views import state
if state.current_model() is None:
    state.select({path!r}, "test model", "path")
from dashboard.views.partitions import render
render()
"""
OVERLAYS = ["class", "HTP (measured)", "GPU (predicted)", "intersection plan", "segmented plan"]


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def viewer(at: AppTest) -> tuple[str, dict]:
    [component] = at.get("component_instance")
    return component.proto.id, json.loads(component.proto.json_args)


def test_viewer_gets_the_graph_the_overlays_and_the_chosen_colouring(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = settle(AppTest.from_string(SCRIPT.format(path=str(path)), default_timeout=TIMEOUT))
    assert not at.error
    first_id, args = viewer(at)
    assert list(args["overlays"]) == OVERLAYS
    nodes = json.loads(args["graph"])["graphs"][0]["nodes"]
    assert {a["value"] for n in nodes for a in n["attrs"] if a["key"] == "name"} == \
        {"conv0", "Relu#1", "erf0", "mod0", "mul0", "sig0"}
    colour = at.selectbox(key="me_overlay")
    assert colour.options == OVERLAYS and colour.value == "class"
    colour.set_value("HTP (measured)").run()
    second_id, args = viewer(at)
    assert list(args["overlays"]) == ["HTP (measured)", *[o for o in OVERLAYS if o != "HTP (measured)"]]
    assert second_id != first_id  # a fresh viewer, which starts with that overlay drawn


def test_a_node_picked_in_the_viewer_becomes_the_selected_node(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = settle(AppTest.from_string(SCRIPT.format(path=str(path)), default_timeout=TIMEOUT))
    assert node_picker(at).value == "erf0"
    graph = load_model(str(path))
    sig = next(n for n in graph.nodes if n.name == "sig0")
    component_id, _args = viewer(at)
    component_key = component_id.rsplit("-", 1)[1]  # the element id ends with the widget's key
    assert component_key.startswith("me_pt_")
    at.session_state[component_key] = me.node_id(sig)  # what the bridge sends when sig0 is clicked
    at.run()
    assert not at.exception
    assert node_picker(at).value == "sig0"
    # a later choice in the page's own selector is not overridden by the viewer's last pick
    node_picker(at).set_value("mod0").run()
    assert node_picker(at).value == "mod0"
    at.run()
    assert node_picker(at).value == "mod0"
