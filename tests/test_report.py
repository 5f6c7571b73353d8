"""The HTML report: built from real results, self-contained, hostile names shown as text, written by
``python -m dashboard report`` (locally and on a device over SSH), opened in headless Chromium,
and offered on every page."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import partition_models as pm
import pytest
from onnx import TensorProto, helper
from test_devices_ssh import ssh_device, sshd  # noqa: F401 - the loopback sshd fixture

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.partition.analysis import PartitionOptions, analyze
from dashboard.render.report import ReportInput, build_html
from dashboard.runtime.client import PROJECT_ROOT

PWN = "<img src=x onerror=window.__pwned=1>"


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(tmp_path / "models"))
    monkeypatch.setenv("QNN_LAB_CONTEXT_STORE", str(tmp_path / "contexts"))


def hostile(tmp_path: Path) -> Path:
    """Relu -> Erf -> Relu, the Erf (which QNN refuses) and the input named like an attack."""
    nodes = [helper.make_node("Relu", [PWN], ["a"], name="relu0"),
             helper.make_node("Erf", ["a"], ["b"], name=PWN + "</td><script>window.__pwned=2</script>"),
             helper.make_node("Relu", ["b"], ["y"], name="relu1")]
    graph = helper.make_graph(nodes, "hostile", [helper.make_tensor_value_info(PWN, TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    path = tmp_path / "hostile.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def external_references(document: str) -> list[str]:
    """Resources the page's own markup would fetch (plotly.js's source mentions attribution links
    it never loads for these charts; Chromium's request log below checks what is really loaded)."""
    markup = re.sub(r"<script[^>]*>.*?</script>", "", document, flags=re.S)
    return re.findall(r"""(?:src|href)\s*=\s*['"]?(?:https?:)?//[^'"\s>]+""", markup)


def test_the_report_holds_every_section_and_escapes_model_text(tmp_path):
    path = hostile(tmp_path)
    graph = load_model(path)
    report = analyze(path, PartitionOptions(backends=("htp", "gpu")))
    document = build_html(ReportInput("hostile.onnx", str(path), file_digest(path), graph,
                                      (classify_ep(graph), classify_refined(graph)), [report], []))
    for section in ("Model", "Classifier evidence", "Partitions", "Timeline"):
        assert f"<h2>{section}</h2>" in document
    assert "1 node(s) keep the model off the NPU" in document
    assert "Operators of type `Erf` are not supported" in document
    assert PWN not in document and "<script>window.__pwned" not in document  # only escaped forms
    assert "&lt;img src=x onerror=window.__pwned=1&gt;" in document
    assert "on the HTP simulator (x86_64)" in document or "on the NPU" in document
    assert document.count("<svg") == 3  # class shares and both plans' strips
    assert "No timeline run in this report" in document and "plotly" not in document.lower()  # no charts, no JS
    assert not external_references(document)


# Built as the dashboard builds it: in a process that imported Streamlit, whose import makes
# plotly's default template its own (a placeholder colourway, #000001, #000002, ...).
AS_THE_DASHBOARD = r"""
import sys
import streamlit  # noqa: F401
import plotly.io as pio
from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.intake.reader import load_model
from dashboard.render.report import ReportInput, build_html
from dashboard.timeline.model import Event, Request, StrategyRun, TimelineRun

assert pio.templates.default == "streamlit", pio.templates.default
events = [Event(0.0, "session_create_start", "cpu"), Event(0.01, "session_create_end", "cpu"),
          Event(0.01, "serve_start", "cpu"), Event(0.02, "session_create_start", "htp"),
          Event(0.2, "session_create_end", "htp"), Event(0.35, "swap", "htp"), Event(0.36, "drain_end", "cpu"),
          Event(0.6, "workload_end", "htp")]
requests = [Request(0, 0.0, 0.01, 0.02, "cpu", True), Request(1, 0.1, 0.1, 0.102, "cpu", True),
            Request(2, 0.4, 0.4, 0.405, "htp", True), Request(3, 0.5, 0.5, 0.504, "htp", True)]
strategies = {name: StrategyRun(name, {"fast": "cpu", "target": "htp"}, events=events, requests=requests,
                                expected_requests=4) for name in ("fast", "migrate")}
run = TimelineRun(device={"label": "local"}, model=sys.argv[1], options={}, workload={"requests": 4, "rate": 10},
                  strategies=strategies, fast={"backend": "cpu", "label": "CPU EP"},
                  target={"backend": "htp", "label": "QNN HTP"}, label="a run")
graph = load_model(sys.argv[1])
sys.stdout.write(build_html(ReportInput("cnn", sys.argv[1], "digest", graph,
                                        (classify_ep(graph), classify_refined(graph)), [], [run])))
"""


def figures(document: str) -> list[dict]:
    """The layouts of the report's plotly figures, as plotly.js receives them."""
    decoder, found = json.JSONDecoder(), []
    for match in re.finditer(r"Plotly\.newPlot\(\s*['\"][^'\"]+['\"],\s*", document):
        data, end = decoder.raw_decode(document, match.end())
        layout, _ = decoder.raw_decode(document, end + len(re.match(r"\s*,\s*", document[end:]).group()))
        found.append({"data": data, "layout": layout})
    return found


def test_a_report_made_where_streamlit_is_imported_draws_in_colour_with_room_for_its_labels():
    sample = PROJECT_ROOT / "samples" / "cnn_classifier.onnx"
    done = subprocess.run([sys.executable, "-c", AS_THE_DASHBOARD, str(sample)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    document = done.stdout
    charts = figures(document)
    assert len(charts) == 5  # the comparison, and Gantt + latency per strategy
    for chart in charts:
        text = json.dumps(chart)
        assert not re.search(r"#0000[0-9a-f]{2}\b", text, re.I), "a placeholder colour of Streamlit's template"
        layout = chart["layout"]
        assert layout["template"]["layout"]["colorway"][0].startswith("#")
        assert layout["xaxis"]["automargin"] is True and layout["yaxis"]["automargin"] is True
    # Signals read as people write numbers: a float32 threshold of 0.05 is 0.05.
    assert "0.05000000074505806" not in document and "0.30000001192092896" not in document
    assert re.search(r"threshold 0\.05\)", document)
    assert "Sizes are in binary units" in document and " MB<" not in document


def test_a_partition_section_is_titled_by_model_and_settings_not_by_dimension_expressions(tmp_path):
    """Only the graph inputs' dimensions are settings: a derived dimension (an output shape's
    expression) the analysis resolved is neither the section's title nor a row of its settings."""
    import dataclasses

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    hostile_path = hostile(tmp_path)
    report = analyze(hostile_path, PartitionOptions(backends=("htp",)))
    derived = "floor(floor(height/2 - 1/2)/2\n - 1/2) + 1"
    report = dataclasses.replace(report, dims={"batch": 3, derived: 56})
    document = build_html(ReportInput("dyn.onnx", str(path), file_digest(path), load_model(path), None, [report]))
    section = document.split("<section id='partitions'>")[1].split("</section>")[0]
    headings = re.findall(r"<h3>(.*?)</h3>", section, flags=re.S)
    assert len(headings) == 1 and headings[0].startswith("dyn.onnx · HTP · device "), headings
    assert "fp16 " in headings[0] and "floor" not in headings[0] and "batch" not in headings[0]
    assert "<td>batch</td><td>3</td>" in document and "floor(" not in document


def cli(*args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", "report", *map(str, args)], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
                          timeout=timeout)


def test_report_command_writes_one_self_contained_file_that_opens_in_chromium(tmp_path):
    from e2e_helpers import launch_chromium, require_chromium
    from playwright.sync_api import sync_playwright

    path = hostile(tmp_path)
    out = tmp_path / "report.html"
    done = cli(path, "--out", out, "--strategies", "fast,migrate", "--requests", "8", "--rate", "40")
    assert done.returncode == 0, done.stderr
    assert str(out) in done.stdout and "timeline of 2 strategies" in done.stdout
    document = out.read_text(encoding="utf-8")
    assert document.count("plotly.js v") <= 2 and document.count("Plotly.newPlot") >= 5  # the library once
    assert not external_references(document)
    assert "Simulator latency is not NPU latency" in document or "on the NPU" in document
    require_chromium()
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        requests, errors = [], []
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
        assert page.locator(".js-plotly-plot").count() >= 5  # comparison, and Gantt + latency per strategy
        assert page.locator("svg[role=img]").count() == 3
        assert page.get_by_role("heading", name="1 node(s) keep the model off the NPU").is_visible()
        assert page.get_by_text(PWN, exact=False).first.is_visible()  # the name, shown as text
        assert page.evaluate("window.__pwned") is None and not errors
        assert all(url.startswith(("file:", "data:", "about:", "blob:")) for url in requests), requests
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()


def test_a_timeline_that_cannot_run_leaves_the_rest_of_the_report(tmp_path):
    """Two nodes share a name: ONNX Runtime refuses the model, so no timeline can run; the partition
    analysis (on its renamed copy) and the classifier still make a report, which says why the
    timeline is missing, and the command warns instead of failing."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="twin"), helper.make_node("Erf", ["a"], ["y"], name="twin")]
    graph = helper.make_graph(nodes, "twins", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = tmp_path / "twins.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), model)
    out = tmp_path / "twins.html"
    done = cli(model, "--out", out, "--backends", "htp", "--requests", "3")
    assert done.returncode == 0, done.stderr
    assert "warning: the timeline could not run: " in done.stderr and "same node name" in done.stderr
    document = out.read_text(encoding="utf-8")
    assert "The timeline could not run.</b>" in document and "same node name (twin)" in document
    assert "twin#1" in document  # the partition analysis ran, on the copy with stable names
    assert "timeline failed (see the report)" in done.stdout


def test_report_command_on_a_device_over_ssh(tmp_path, sshd):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = ssh_device(sshd)
    out = tmp_path / "report.html"
    done = cli(path, "--out", out, "--device", device.url, "--backends", "htp", "--strategies", "fast",
               "--requests", "3")
    assert done.returncode == 0, done.stderr
    document = out.read_text(encoding="utf-8")
    assert f"device {device.label}" in document.replace("&amp;", "&")
    assert "2 node(s) keep the model off the NPU" in document


@pytest.mark.parametrize("args, message", [
    (["{model}", "--out", "/no/such/folder/report.html", "--no-timeline"], "its folder does not exist"),
    (["{model}"], "the following arguments are required: --out"),
    (["{model}", "--out", "{tmp}/r.html", "--strategies", "teleport"], "unknown strategy teleport"),
    (["{tmp}/missing.onnx", "--out", "{tmp}/r.html"], "no such file"),
    (["{model}", "--out", "{tmp}/r.html", "--shape", "x=0,1", "--no-timeline"], "positive integer"),
])
def test_report_command_bad_input_is_one_error_line(tmp_path, args, message):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    done = cli(*[a.format(model=model, tmp=tmp_path) for a in args])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("name", ["overview", "classifier", "partitions", "devices", "timeline", "compare", "profile"])
def test_every_page_offers_the_report_and_the_classifier_its_json(tmp_path, name):
    from page_jobs import settle
    from streamlit.testing.v1 import AppTest

    from dashboard.views.state import SelectedModel

    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = AppTest.from_file(str(PROJECT_ROOT / "app.py"), default_timeout=300).switch_page(f"pages/{name}.py")
    at.session_state["selected_model"] = SelectedModel(str(path), "rejects", file_digest(path), "path")
    at.session_state["intake_started"] = True
    settle(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Report (HTML)" in labels
    assert ("Download both classifications (JSON)" in labels) == (name == "classifier")


def test_the_downloaded_file_is_named_with_the_time_the_report_says_it_was_generated(tmp_path):
    from dashboard.views.report import report_file
    from dashboard.views.state import SelectedModel

    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    selected = SelectedModel(str(path), "rejects", file_digest(path), "path")
    name, build = report_file(selected, load_model(path), list, list)
    stamp = re.search(r"-report-(\d{8}T\d{6}Z)\.html$", name).group(1)
    generated = re.search(r"Generated (\S+ \S+) UTC", build()).group(1)
    assert generated.replace("-", "").replace(" ", "T").replace(":", "") + "Z" == stamp
