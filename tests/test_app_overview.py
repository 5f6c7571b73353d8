"""The Overview page under AppTest: facts read independently with onnx, symbolic dimensions,
the op histogram, Netron reachable at the URL the user's browser gets, hostile names escaped."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections import Counter

import numpy as np
import onnx
import pytest

from dashboard.intake.samples import sample_path

URL = "http://lab.example:8501/"


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def plotly_array(value):
    """Plotly's JSON encodes numeric arrays as {"dtype", "bdata": base64}."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return value


def overview(app, path, **context):
    at = app("--model", str(path))
    at.context.update(context)
    return at.run()


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def io_frame(at):
    return next(d.value for d in at.dataframe if "dtype" in d.value.columns)


def iframe_src(at) -> str | None:
    frames = [e.proto.src for e in at.get("iframe")]
    return frames[0] if frames else None


def test_facts_match_onnx(app):
    path = sample_path("llm_decoder_kv.onnx")
    proto = onnx.load(path, load_external_data=False)
    at = overview(app, path)
    assert not at.exception and not at.error
    assert at.title[0].value == "Model overview"
    assert metric(at, "Nodes") == f"{len(proto.graph.node):,}"
    assert metric(at, "Op types") == str(len({(n.domain, n.op_type) for n in proto.graph.node}))
    initializers = {i.name for i in proto.graph.initializer}
    inputs = [i.name for i in proto.graph.input if i.name not in initializers]
    assert metric(at, "Inputs / outputs") == f"{len(inputs)} / {len(proto.graph.output)}"
    default_opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    assert metric(at, "IR · ai.onnx opset") == f"{proto.ir_version} · {default_opset}"
    table = io_frame(at)
    assert list(table["name"]) == inputs + [o.name for o in proto.graph.output]


def test_symbolic_dims_are_flagged_with_the_qnn_note(app):
    path = sample_path("llm_decoder_kv.onnx")
    proto = onnx.load(path, load_external_data=False)
    at = overview(app, path)
    symbolic = {d.dim_param for i in proto.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    assert symbolic
    note = unescape(next(w.value for w in at.warning if "symbolic dimension" in w.value))
    assert "QNN" in note and all(name in note for name in symbolic)
    initializers = {i.name for i in proto.graph.initializer}
    values = [v for v in proto.graph.input if v.name not in initializers] + list(proto.graph.output)
    expected = [", ".join(d.dim_param for d in v.type.tensor_type.shape.dim if d.dim_param) for v in values]
    assert list(io_frame(at)["symbolic dims"]) == expected


def test_static_model_says_shapes_are_static(app, tmp_path):
    model = onnx.load(sample_path("cnn_classifier.onnx"))
    for value in [*model.graph.input, *model.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_value = 1
    path = tmp_path / "static.onnx"
    onnx.save(model, path)
    at = overview(app, path)
    assert not [w for w in at.warning if "symbolic dimension" in w.value]
    assert any("static" in s.value for s in at.success)
    assert set(io_frame(at)["symbolic dims"]) == {""}


def test_op_histogram_counts_every_node(app):
    path = sample_path("text_encoder.onnx")
    proto = onnx.load(path, load_external_data=False)
    at = overview(app, path)
    [chart] = at.get("plotly_chart")
    traces = json.loads(chart.proto.spec)["data"]
    bars = {label: int(count) for trace in traces
            for count, (label, _share) in zip(plotly_array(trace["x"]), trace["customdata"])}
    assert bars == dict(Counter(n.op_type for n in proto.graph.node))


def test_weights_split_embedded_and_external(app, tmp_path):
    model = onnx.load(sample_path("cnn_classifier.onnx"))
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.data", size_threshold=0)
    external = (tmp_path / "ext.data").stat().st_size
    at = overview(app, path)
    sizes = dict(next(d.value for d in at.dataframe if "what" in d.value.columns).values)
    from dashboard.intake.overview import human_bytes

    assert sizes["weights in external-data files"] == human_bytes(external)
    assert sizes["external-data files"] == "ext.data"
    (tmp_path / "ext.data").unlink()  # as after an upload: the .onnx without its data file
    at = overview(app, path)
    assert any("not found next to the model" in unescape(w.value) for w in at.warning)


@pytest.mark.parametrize("server_url, expected_host", [
    ("http://lab.example:8501/", "lab.example"),
    ("https://10.1.2.3:9000/sub/", "10.1.2.3"),
    ("http://[fd00::5]:8501/", "[fd00::5]"),
    ("http://[::1]:8501/", "127.0.0.1"),
    ("http://rebound.example:8501/", "localhost"),  # a name the operator did not allow: never echoed
])
def test_netron_url_uses_the_browsers_host_and_serves_the_model(app, server_url, expected_host, monkeypatch):
    """The browser's host when the dashboard answers to it (loopback, or the operator's
    ``allowed_hosts``), else localhost."""
    from dashboard import access

    monkeypatch.setenv("QNN_LAB_ALLOWED_HOSTS", "lab.example,10.1.2.3,fd00::5")
    access.reload()
    path = sample_path("cnn_classifier.onnx")
    at = overview(app, path, url=server_url)
    src = iframe_src(at)
    match = re.fullmatch(rf"http://{re.escape(expected_host)}:(\d+)/([A-Za-z0-9_-]{{32}})/", src or "")
    assert match, src
    port, token = int(match.group(1)), match.group(2)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{token}/data/model.onnx", timeout=10) as response:
        assert response.read() == path.read_bytes()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{token}/", timeout=10) as response:
        assert b"<title>Netron</title>" in response.read()
    assert any(b.proto.url == src for b in at.get("link_button"))
    tunnel = next(c.value for c in at.caption if "ssh -N -L" in c.value)
    assert f"{port}:127.0.0.1:{port}" in tunnel
    https_note = any("HTTPS" in c.value for c in at.caption)
    assert https_note == server_url.startswith("https:")


def test_netron_server_is_reused_across_renders(app):
    at = overview(app, sample_path("cnn_classifier.onnx"), url=URL)
    first = iframe_src(at)
    at.run()
    assert iframe_src(at) == first


def test_model_explorer_is_offered_beside_netron(app):
    """Switching the viewer swaps Netron's frame for the Model Explorer component, fed with the
    model's graph (every node, its name scope) and no overlays on this page."""
    from dashboard.render.model_explorer import GRAPH_ID

    path = sample_path("llm_decoder_kv.onnx")
    proto = onnx.load(path, load_external_data=False)
    at = overview(app, path, url=URL)
    assert iframe_src(at) is not None
    at.segmented_control(key="overview_viewer").set_value("Model Explorer").run()
    assert not at.exception and not at.error
    assert iframe_src(at) is None
    [component] = at.get("component_instance")
    args = json.loads(component.proto.json_args)
    [model_graph] = json.loads(args["graph"])["graphs"]
    assert model_graph["id"] == GRAPH_ID
    ops = [n for n in model_graph["nodes"] if n["id"].startswith("n")]
    assert [n["label"] for n in ops] != [] and len(ops) == len(proto.graph.node)
    names = {next(a["value"] for a in n["attrs"] if a["key"] == "name"): n["namespace"] for n in ops}
    assert names == {n.name: "/".join(n.name.strip("/").split("/")[:-1]) for n in proto.graph.node}
    assert "model/layers.0/attn" in names.values()
    assert args["overlays"] == {}


def test_hostile_names_render_escaped(app, hostile_model, assert_markdown_escaped):
    import zoo

    at = overview(app, hostile_model)
    assert not at.exception and not at.error
    assert_markdown_escaped([*at.markdown, *at.caption, *at.warning, *at.title, *at.info])
    names = list(io_frame(at)["name"])
    assert names == ["<b>input</b>", "out</td>"]  # dataframes show text as text
    proto = onnx.load(hostile_model)
    assert len(proto.graph.node) == len(zoo.HOSTILE_NAMES)


def test_every_zoo_model_renders_both_pages(app, tmp_path):
    """Decoders, encoders, CNNs, QDQ, RNNs, control flow, custom domains, empty graphs, torch
    exports: each model opens by path and draws both pages without an exception or an error."""
    import zoo

    paths = [zoo.save(m.build(), tmp_path) for m in zoo.ZOO.values()]
    paths += [zoo.data_path(name) for name in zoo.TORCH_MODELS]
    at = app().run()
    problems = []
    for path in paths:
        at.session_state["intake_mode"] = "Path"
        at.session_state["intake_path"] = str(path)
        at.switch_page("pages/overview.py").run()
        next(b for b in at.sidebar.button if b.label == "Open").click().run()
        shown = at.session_state["selected_model"].path == str(path)
        overview_issues = [*at.exception, *at.error]
        at.switch_page("pages/classifier.py").run()
        if not shown or overview_issues or at.exception or at.error:
            problems.append((path.name, shown, [e.value for e in [*overview_issues, *at.exception, *at.error]]))
    assert not problems


def _work_inside_an_if(tmp_path):
    """A model shaped like a real scripted export: five top-level nodes around an If whose branch
    holds a Loop with the real work (STFT, Conv, LSTM) and the weights, two bodies deep."""
    from onnx import TensorProto, helper, numpy_helper

    vi = helper.make_tensor_value_info
    weights = [numpy_helper.from_array(np.ones((8, 1, 3), np.float32), "conv_w"),
               numpy_helper.from_array(np.ones((1, 64, 8), np.float32), "lstm_w"),
               numpy_helper.from_array(np.ones((1, 64, 16), np.float32), "lstm_r")]
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("STFT", ["frames", "step"], ["spectrum"], name="stft"),
         helper.make_node("Conv", ["spectrum", "conv_w"], ["features"], name="conv"),
         helper.make_node("LSTM", ["features", "lstm_w", "lstm_r"], ["hidden"], name="lstm", hidden_size=16),
         helper.make_node("Relu", ["hidden"], ["state_out"], name="relu")],
        "loop_body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                      vi("frames", TensorProto.FLOAT, None)],
        [vi("cond_out", TensorProto.BOOL, []), vi("state_out", TensorProto.FLOAT, None)], weights)
    then_branch = helper.make_graph([helper.make_node("Loop", ["trip", "", "audio"], ["looped"], name="loop",
                                                      body=loop_body)],
                                    "then_branch", [], [vi("looped", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", ["audio"], ["passed"], name="pass_through")],
                                    "else_branch", [], [vi("passed", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Shape", ["audio"], ["shape"], name="shape"),
         helper.make_node("Size", ["shape"], ["rank"], name="rank"),
         helper.make_node("Equal", ["rank", "two"], ["is_batch"], name="is_batch"),
         helper.make_node("If", ["is_batch"], ["out"], name="choose", then_branch=then_branch, else_branch=else_branch),
         helper.make_node("Identity", ["out"], ["y"], name="result")],
        "scripted", [vi("audio", TensorProto.FLOAT, ["batch", "samples"]), vi("trip", TensorProto.INT64, []),
                     vi("step", TensorProto.INT64, [])], [vi("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(2, np.int64), "two")])
    path = tmp_path / "scripted.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    return path


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for body in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _all_nodes(body)


def test_counts_include_what_runs_inside_control_flow_bodies(app, tmp_path):
    from dashboard.intake.overview import human_bytes

    path = _work_inside_an_if(tmp_path)
    proto = onnx.load(path)
    nodes = list(_all_nodes(proto.graph))
    at = overview(app, path)
    assert not at.exception and not at.error
    assert metric(at, "Nodes") == f"{len(nodes):,}" == "12"
    nodes_help = next(m.proto.help for m in at.metric if m.label == "Nodes")
    assert nodes_help == f"{len(proto.graph.node)} at the top level + {len(nodes) - len(proto.graph.node)} inside " \
                         "control-flow bodies"
    assert metric(at, "Op types") == str(len({n.op_type for n in nodes}))
    body_weights = sum(np.prod(t.dims) * 4 for t in proto.graph.node[3].attribute[1].g.node[0].attribute[0].g.initializer)
    assert metric(at, "Weights") == human_bytes(int(body_weights) + 8)  # the body's three plus the top level's 'two'
    note = unescape(next(i.value for i in at.info if "control-flow" in i.value))
    assert "7 of the 12 nodes run inside 3 control-flow bodies" in note and "2 deep" in note
    assert any("12 nodes (7 inside control flow)" in c.value for c in at.sidebar.caption)
    sizes = dict(next(d.value for d in at.dataframe if "what" in d.value.columns).values)
    assert sizes["weights inside control-flow bodies"] == human_bytes(int(body_weights))

    [chart] = at.get("plotly_chart")
    traces = {t["name"]: t for t in json.loads(chart.proto.spec)["data"]}
    labels = json.loads(chart.proto.spec)["layout"]["yaxis"]["ticktext"]

    def bars(name):
        trace = traces[name]
        return {labels[int(y)]: int(x) for x, y in zip(plotly_array(trace["x"]), plotly_array(trace["y"])) if x}

    inside = Counter(n.op_type for n in nodes) - Counter(n.op_type for n in proto.graph.node)
    assert bars("ai.onnx · inside bodies") == dict(inside)
    assert bars("ai.onnx") == dict(Counter(n.op_type for n in proto.graph.node))
    assert {"LSTM", "Conv", "STFT"} <= set(bars("ai.onnx · inside bodies"))


# -- issue 27, item 6: weights held in Constant nodes; one size rule -----------------------------------
def _constant_weights_model(path, big: int = 128, small: int = 4):
    """A Conv whose weight is a Constant node (an exporter that folds weights so), plus a large
    Constant (kept as a header only: never read) added to its output."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.full((small, 3, 3, 3), 0.1, np.float32), "w")
    bias = numpy_helper.from_array(np.zeros((1, small, big, big), np.float32), "b")
    nodes = [helper.make_node("Constant", [], ["w"], name="const_w", value=weight),
             helper.make_node("Constant", [], ["b"], name="const_b", value=bias),
             helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "constants", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              [1, 3, big, big])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return weight.raw_data.__len__() + bias.raw_data.__len__()


def test_weights_held_in_constant_nodes_are_counted_on_the_page_and_in_the_report(app, tmp_path):
    """A model whose weights are all in Constant nodes showed "Weights 0 B"."""
    from dashboard.intake.overview import human_bytes
    from dashboard.intake.reader import load_model
    from dashboard.render.report import _model as report_model

    path = tmp_path / "constants.onnx"
    held = _constant_weights_model(path)
    at = overview(app, path)
    assert not at.exception and not at.error
    assert metric(at, "Weights") == human_bytes(held) != "0 B"
    sizes = dict(next(d.value for d in at.dataframe if "what" in d.value.columns).values)
    assert sizes["weights held in Constant nodes"] == human_bytes(held) == sizes["weights inside the file"]

    from types import SimpleNamespace

    section = report_model(SimpleNamespace(graph=load_model(path), path=str(path)))  # reads only these two
    assert f"<td>weights</td><td>{human_bytes(held)}</td>" in section


@pytest.mark.parametrize("count", [0, 1023, 1536, 230_785, 5 << 20, 3 << 30])
def test_every_size_is_binary_and_labelled_so(count):
    """One rule for every page, the report and the CLI: powers of 1024 named KiB, MiB, GiB."""
    from dashboard.intake.overview import human_bytes
    from dashboard.render.report import binary_size

    text = human_bytes(count)
    number, unit = text.split(" ")
    assert unit in ("B", "KiB", "MiB", "GiB") and binary_size(count) == text
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
    assert abs(float(number) * scale - count) <= 0.05 * count + 1  # the number is the size in that unit
