"""The Quantize & accuracy page under AppTest (issue 25 §3).

The page opens on the bundled CNN sample with its data set and licence and the preprocessing
prefilled from the model; a bad upload (a corrupt zip, a wrong-shaped npz) is one error line and
keeps the page and its earlier results; random inputs are labelled beside every figure; the run's
progress and Cancel work as the Profile page's. Tests marked ``simulator`` run the page's real job
on the HTP simulator on a small model (``accuracy_models.outlier_model``) and its samples: the
per-output table and the layer chart; a quantization with a target, its steps and downloads, and
the reproduce script run outside the dashboard, whose SQNR must equal the page's.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from datetime import datetime, timezone

import numpy as np
import pytest
from page_jobs import page_with_model, settle

from accuracy_models import outlier_model, save, save_samples
from dashboard.intake.samples import sample_path

SAMPLE = sample_path("cnn_classifier.onnx")
JOB = "accuracy_job"
TIMEOUT = 600
LICENCE = "Test pictures: CC0 1.0, made by the test suite."


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def texts(at) -> str:
    said = "\n".join(str(e.value) for kind in (at.markdown, at.caption, at.info, at.error, at.warning, at.success,
                                                at.subheader, at.text) for e in kind)
    return said.replace("\\", "").replace("**", "")


def errors(at) -> list[str]:
    return [e.value.replace("\\", "") for e in at.error]


def chart_specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def chart_titled(at, words: str) -> dict:
    return next(spec for spec in chart_specs(at) if words in spec["layout"]["title"]["text"])


def frame_with(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def digest_of(at) -> str:
    return at.session_state["selected_model"].digest


def png(seed: int, size: int = 224) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture
def outlier(tmp_path):
    return save(outlier_model(), tmp_path, "outlier.onnx")


def upload(at, name: str, data: bytes):
    at.radio(key=f"acc_data_{digest_of(at)}").set_value("upload").run()
    return at.file_uploader(key=f"acc_upload_{digest_of(at)}").upload(name, data).run()


# -- hand-built results, as a finished run leaves them ---------------------------------------------------
def fake_report(random: bool):
    from dashboard.accuracy.model import (AccuracyReport, Comparison, DataInfo, LayerError, Layers, Metrics,
                                          OutputAccuracy)

    data = DataInfo(source="random inputs" if random else "data.npz", count=3, names=["a", "b", "c"], random=random,
                    description="3 random input sample(s) (no data given)" if random else "3 sample(s) from data.npz")
    samples = [Metrics(sqnr_db=v, cosine=0.99) for v in (40.0, 20.0, 30.0)]
    out = OutputAccuracy("logits", [1, 10], Metrics(sqnr_db=25.5, max_abs=0.1, cosine=0.999), samples, worst=[1, 2, 0])
    htp = Comparison("htp_vs_float", "float model on the HTP", "float model on the CPU EP (fp32)",
                     "HTP simulator (x86_64)", outputs=[out])
    rows = [LayerError(0, "c1", "conv1", "Conv", cumulative=50.0, layerwise=52.0),
            LayerError(1, "spike", "add_spike", "Add", cumulative=12.0, layerwise=11.0, why="a clipped outlier"),
            LayerError(2, "c3", "conv3", "Conv", cumulative=11.5, layerwise=45.0)]
    layers = Layers("QDQ model on the HTP simulator (x86_64)", ["cumulative", "layerwise"], rows, first_jump="spike",
                    worst="spike")
    return AccuracyReport("outlier.onnx", data, [htp], layers=layers, verdicts=["a verdict line"])


def with_result(at, report, **extra):
    entry = {"kind": "Accuracy", "report": report, "quantize": None, "qdq": None, "overrides": None, "lifted": [],
             "options": None, "digest": digest_of(at), "name": "outlier",
             "path": at.session_state["selected_model"].path,
             "key": "k", "finished": datetime.now(timezone.utc), "what": "earlier", "seconds": 1.0, "samples": None,
             "label": "#1 earlier", **extra}
    at.session_state["accuracy_runs"] = [entry]
    at.run()
    assert not at.exception, at.exception
    return at


# -- no simulator ---------------------------------------------------------------------------------------
@pytest.mark.slow  # 1.7 s: an AppTest reading three 224x224 pictures twice
def test_the_page_opens_on_the_bundled_cnn_sample_with_its_data_licence_and_preprocessing(tmp_path, monkeypatch):
    from dashboard.accuracy import data

    folder = tmp_path / "data" / "cnn_classifier"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"pic{i}.png").write_bytes(png(i))
    (folder / "LICENCE.txt").write_text(LICENCE)
    monkeypatch.setattr(data, "bundled", lambda name: folder if name == "cnn_classifier.onnx" else None)
    at = page_with_model("accuracy", SAMPLE, "cnn", timeout=120)
    assert not at.exception, at.exception
    digest = digest_of(at)
    choice = at.radio(key=f"acc_data_{digest}")
    assert choice.value == "bundled" and "random" in choice.options[-1]
    said = texts(at)
    assert "3 sample(s) from cnn_classifier" in said and "images, 224x224 NCHW RGB" in said
    assert LICENCE in said  # the licence, shown
    scope = f"{digest}_model"  # prefilled from the model (its input shape) and the imagenet default
    assert at.text_input(key=f"acc_pre_resize_{scope}").value == "224x224"
    assert at.selectbox(key=f"acc_pre_layout_{scope}").value == "NCHW"
    assert at.text_input(key=f"acc_pre_mean_{scope}").value == "0.485, 0.456, 0.406"
    assert at.number_input(key=f"acc_pre_scale_{scope}").value == pytest.approx(1 / 255)
    assert not at.error and "No result yet" in said
    # a preset picked refills the fields; a field changed is recorded as the page's
    at.selectbox(key=f"acc_preset_{digest}").set_value("raw").run()
    assert at.number_input(key=f"acc_pre_scale_{digest}_raw").value == 1.0
    at.text_input(key=f"acc_pre_resize_{digest}_raw").input("32x32").run()
    assert "32x32 NCHW RGB" in texts(at) and "resize set on the page" in texts(at)
    # 32x32 pictures do not fit a 224x224 input: one line naming the file and the shape expected
    assert len(at.error) == 1 and "pic0.png" in errors(at)[0] and "[1, 3, 224, 224]" in errors(at)[0], errors(at)
    at.text_input(key=f"acc_pre_resize_{digest}_raw").input("224x224").run()
    assert not at.error, errors(at)
    assert "3 sample(s) from cnn_classifier (images, 224x224 NCHW RGB float32, x*1 (preset raw)" in texts(at)


def test_a_model_without_a_data_set_starts_on_random_inputs_and_says_so(outlier):
    at = page_with_model("accuracy", outlier, "outlier", timeout=120)
    assert not at.exception, at.exception
    choice = at.radio(key=f"acc_data_{digest_of(at)}")
    assert choice.value == "random" and len(choice.options) == 2  # no bundled data set for it
    assert any("Random inputs" in w.value and "random inputs" in w.value for w in at.warning)


def test_a_bad_upload_is_one_error_line_and_keeps_the_page_and_its_results(outlier):
    at = with_result(page_with_model("accuracy", outlier, "outlier", timeout=120), fake_report(random=False))
    upload(at, "broken.zip", b"PK\x03\x04" + b"\x00" * 40)
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "broken.zip" in errors(at)[0] and "zip" in errors(at)[0]
    assert list(frame_with(at, "sqnr_db")["sqnr_db"]) == [25.5]  # the earlier result is still shown
    assert at.button(key="acc_run")  # and the page still runs
    buffer = io.BytesIO()
    np.savez(buffer, image=np.zeros((2, 3, 5, 5), np.float32))  # the model takes [1, 3, 16, 16]
    upload(at, "wrong.npz", buffer.getvalue())
    assert len(at.error) == 1, errors(at)
    assert "wrong.npz" in errors(at)[0] and "[1, 3, 16, 16]" in errors(at)[0], errors(at)
    at.button(key="acc_run").click().run()  # pressing Run with it: the same one line, nothing starts
    assert errors(at) and all("wrong.npz" in e for e in errors(at)), errors(at)
    assert JOB not in at.session_state
    assert list(frame_with(at, "sqnr_db")["sqnr_db"]) == [25.5]


def test_an_upload_over_the_cap_is_refused_before_its_bytes_are_read(outlier, monkeypatch):
    from dashboard.accuracy import data

    monkeypatch.setattr(data, "MAX_UPLOAD_BYTES", 1000)
    at = page_with_model("accuracy", outlier, "outlier", timeout=120)
    upload(at, "big.npz", b"\x00" * 5000)
    assert len(at.error) == 1 and "big.npz" in errors(at)[0] and "at most" in errors(at)[0]
    assert "5,000" in errors(at)[0] or "4.9 KiB" in errors(at)[0], errors(at)


def test_random_inputs_are_labelled_beside_every_figure(outlier):
    at = with_result(page_with_model("accuracy", outlier, "outlier", timeout=120), fake_report(random=True))
    specs = chart_specs(at)
    assert len(specs) == 2  # the per-output chart and the layer chart
    assert all("random inputs" in s["layout"]["title"]["text"] for s in specs)
    assert all("HTP simulator" in s["layout"]["title"]["text"] for s in specs)
    assert set(frame_with(at, "sqnr_db")["data"]) == {"random inputs"}
    said = texts(at)
    assert "Random inputs" in said and "Every figure above is on random inputs" in said
    worst = frame_with(at, "rank")  # the worst samples, lowest SQNR first
    assert list(worst["sample"]) == ["b", "c", "a"] and list(worst["sqnr_db"]) == [20.0, 30.0, 40.0]


def test_the_layer_chart_is_in_graph_order_with_both_modes_and_the_first_jump_marked(outlier):
    report = fake_report(random=False)
    at = with_result(page_with_model("accuracy", outlier, "outlier", timeout=120), report)
    chart = chart_titled(at, "per-layer SQNR")
    traces = {t["name"].split(" (")[0]: t for t in chart["data"]}
    assert traces["layerwise"]["type"] == "bar" and traces["cumulative"]["type"] == "scatter"
    assert traces["layerwise"]["y"] == [52.0, 11.0, 45.0] and traces["cumulative"]["y"] == [50.0, 12.0, 11.5]
    assert [x.split(". ")[1] for x in traces["cumulative"]["x"]] == ["conv1", "add_spike", "conv3"]
    assert chart["layout"]["shapes"][0]["x0"] == 1  # the line at add_spike, the first jump
    assert "first jump: add_spike" in chart["layout"]["annotations"][0]["text"]
    assert "3 sample(s) of data.npz" in chart["layout"]["title"]["text"]
    table = frame_with(at, "layerwise")
    assert list(table["tensor"]) == ["c1", "spike", "c3"] and list(table["why"])[1] == "a clipped outlier"
    assert "The error first jumps at add_spike [Add]" in texts(at)


def test_a_running_job_shows_its_step_and_cancel_stops_it_keeping_the_earlier_results(outlier, monkeypatch):
    from dashboard.partition.protocol import Stage
    from dashboard.runtime.jobs import Cancelled
    from dashboard.views import accuracy as view

    def hanging(path, dataset, settings, *, on_event, cancel, **_):
        on_event(Stage("measuring accuracy: compiling for the HTP", 0.3))
        deadline = time.monotonic() + 60
        while not cancel.cancelled and time.monotonic() < deadline:
            time.sleep(0.05)
        raise Cancelled("cancelled")

    monkeypatch.setattr(view, "measure", hanging)
    at = with_result(page_with_model("accuracy", outlier, "outlier", timeout=120), fake_report(random=False))
    at.button(key="acc_run").click().run()
    job = at.session_state[JOB]
    deadline = time.monotonic() + 30
    while "compiling" not in job.stage and time.monotonic() < deadline:
        time.sleep(0.05)
    at.run()
    progress = at.get("progress")
    assert progress and "compiling for the HTP" in progress[0].proto.text and "elapsed" in progress[0].proto.text
    at.button(key=f"{JOB}_cancel").click().run()
    job.wait(30)
    assert job.done and job.cancelled
    settle(at, JOB)
    assert any("Cancelled after" in i.value for i in at.info)
    assert [e["label"] for e in at.session_state["accuracy_runs"]] == ["#1 earlier"]  # nothing lost
    assert list(frame_with(at, "sqnr_db")["sqnr_db"]) == [25.5]


# -- on the HTP simulator -------------------------------------------------------------------------------
@pytest.mark.simulator
def test_accuracy_on_uploaded_samples_shows_the_per_output_table_and_the_layer_chart(outlier, tmp_path):
    at = page_with_model("accuracy", outlier, "outlier", timeout=TIMEOUT)
    upload(at, "data.npz", save_samples(tmp_path, count=6).read_bytes())
    assert not at.error, errors(at)
    assert "6 sample(s) from data.npz" in texts(at)
    at.checkbox(key=f"acc_layers_{digest_of(at)}").check()
    at.button(key="acc_run").click()
    settle(at, JOB, timeout=TIMEOUT)
    assert not at.error, errors(at)
    report = at.session_state["accuracy_runs"][-1]["report"]
    assert report.data.count == 6 and not report.data.random and report.data.names[0] == "data.npz[0]"
    table = frame_with(at, "sqnr_db")
    htp = table[table["comparison"] == "htp_vs_float"].iloc[0]
    assert htp["output"] == "logits" and htp["hardware"] == "HTP simulator (x86_64)"
    assert htp["sqnr_db"] == pytest.approx(report.comparison("htp_vs_float").outputs[0].overall.sqnr_db)
    assert htp["sqnr_db"] > 30  # fp16 on the HTP against fp32: close, not equal
    chart = chart_titled(at, "per-layer SQNR")
    title = chart["layout"]["title"]["text"]
    assert "HTP simulator" in title and "6 sample(s) of data.npz" in title
    layerwise = next(t for t in chart["data"] if t["name"].startswith("layerwise"))
    layer_table = frame_with(at, "layerwise")
    assert len(layerwise["x"]) == len(report.layers.rows) == len(layer_table) > 3
    assert list(layer_table["tensor"]) == [r.tensor for r in sorted(report.layers.rows, key=lambda r: r.order)]
    assert layerwise["y"] == pytest.approx(list(layer_table["layerwise"]))
    assert "HTP simulator" in chart_titled(at, "SQNR per output")["layout"]["title"]["text"]
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Report (JSON)" in labels and "QDQ model (.onnx)" not in labels  # no QDQ model asked for


@pytest.mark.simulator
def test_a_quantization_with_a_target_shows_its_steps_and_its_script_reproduces_the_page(outlier, tmp_path):
    at = page_with_model("accuracy", outlier, "outlier", timeout=TIMEOUT)
    upload(at, "data.npz", save_samples(tmp_path, count=6).read_bytes())
    at.radio(key="acc_mode").set_value("Quantize").run()
    digest = digest_of(at)
    at.text_input(key=f"acc_target_{digest}").input("30")
    at.toggle(key=f"acc_cov_{digest}").set_value(False)
    at.button(key="acc_run").click()
    settle(at, JOB, timeout=TIMEOUT)
    assert not at.error, errors(at)
    entry = at.session_state["accuracy_runs"][-1]
    result = entry["quantize"]
    assert result.reached and result.lifted and entry["qdq"][:2] and json.loads(entry["overrides"])
    steps = frame_with(at, "cost_unit")
    assert list(steps["label"])[:2] == ["all u8", "all u16"] and len(steps) == len(result.steps)
    assert set(steps["hardware"].dropna()) == {"HTP simulator (x86_64)"} and steps["cycles"].notna().all()
    assert "simulated HTP cycles" in texts(at)
    labels = [b.proto.label for b in at.get("download_button")]
    for label in ("QDQ model (.onnx)", "Overrides (JSON)", "Samples (.npz)", "Reproduce (Python)", "Report (JSON)"):
        assert label in labels, labels
    # the script, outside the dashboard, rebuilds the QDQ model and finds the page's CPU EP figure
    script = next(c.value for c in at.code if "get_qnn_qdq_config" in c.value)
    imported = {line.split()[1].split(".")[0] for line in script.splitlines() if line.startswith(("import ", "from "))}
    assert imported == {"numpy", "onnx", "onnxruntime"}, imported  # nothing of the dashboard's
    work = tmp_path / "outside"
    work.mkdir()
    (work / "outlier.onnx").write_bytes(outlier.read_bytes())
    data_name = next(line for line in script.splitlines() if line.startswith("DATA = ")).split("'")[1]
    (work / data_name).write_bytes(entry["samples"])
    (work / "reproduce.py").write_text(script)
    ran = subprocess.run([sys.executable, "reproduce.py"], cwd=work, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    printed = float(ran.stdout.split("SQNR ")[1].split(" dB")[0])
    page = entry["report"].comparison("qdq_cpu_vs_float").outputs[0].overall.sqnr_db
    assert printed == pytest.approx(page, abs=0.1)
    # the QDQ model of this session, compared again on the Accuracy side, layer by layer
    at.radio(key="acc_mode").set_value("Accuracy").run()
    at.selectbox(key=f"acc_qdq_{digest}").set_value(entry["label"]).run()
    at.checkbox(key=f"acc_layers_{digest}").check()
    at.button(key="acc_run").click()
    settle(at, JOB, timeout=TIMEOUT)
    assert not at.error, errors(at)
    again = at.session_state["accuracy_runs"][-1]
    assert again is not entry and again["qdq"] == entry["qdq"] and again["report"].quantized
    table = frame_with(at, "sqnr_db")
    assert {"htp_vs_float", "qdq_htp_vs_float", "qdq_cpu_vs_float"} <= set(table["comparison"])
    qdq_cpu = table[table["comparison"] == "qdq_cpu_vs_float"].iloc[0]["sqnr_db"]
    assert qdq_cpu == pytest.approx(page, abs=0.01)  # the same QDQ model, the same samples
    assert "QDQ" in again["report"].layers.target
    assert "HTP simulator" in chart_titled(at, "per-layer")["layout"]["title"]["text"]


def test_hostile_upload_names_are_escaped_in_the_error(outlier, assert_markdown_escaped):
    at = page_with_model("accuracy", outlier, "outlier", timeout=120)
    upload(at, "<img src=x onerror=alert(1)>[x](javascript:1).zip", b"not a zip")
    assert len(at.error) == 1 and "onerror" in at.error[0].value
    assert_markdown_escaped(at.error)
