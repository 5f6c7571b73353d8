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
])
def test_netron_url_uses_the_browsers_host_and_serves_the_model(app, server_url, expected_host):
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
