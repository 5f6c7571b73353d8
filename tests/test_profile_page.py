"""The Profile page under AppTest, the cost overlays of the Partitions graph, and the comparison of
two profiles.

Most tests draw hand-built profiles (``profile_fixtures``: a profile of the CNN sample with the
EP's inserted Transpose, fused groups, a CPU-fallback node and a failed GPU; an AI Hub import), put
into the session as a finished run would leave them, so they need no simulator. One test runs a
real profile of the CNN sample on the HTP simulator through the page's button and job.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pandas as pd
import pytest
from deadlines import DEADLINE, wait_until
from page_jobs import page_with_model, settle
from profile_fixtures import aihub_profile, cnn_profile

from dashboard.intake.reader import load_model
from dashboard.intake.samples import sample_path
from dashboard.render import model_explorer as me
from dashboard.render import profile_views

SAMPLE = sample_path("cnn_classifier.onnx")
JOB = "profile_job"
TIMEOUT = 300


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def texts(at) -> str:
    return "\n".join(str(e.value) for kind in (at.markdown, at.caption, at.info, at.error, at.warning, at.success,
                                                at.subheader, at.metric) for e in kind).replace("\\", "")


def with_profiles(*profiles):
    """The Profile page of the CNN sample with ``profiles`` in the session, as finished runs leave them."""
    at = page_with_model("profile", SAMPLE, "cnn", timeout=120)
    digest = at.session_state["selected_model"].digest
    now = datetime.now(timezone.utc)
    at.session_state["profile_runs"] = [{"label": f"#{i + 1} {label}", "profile": p, "digest": digest, "name": "cnn",
                                         "device": "local", "finished": now, "what": label}
                                        for i, (label, p) in enumerate(profiles)]
    at.run()
    assert not at.exception, at.exception
    return at


def frame_with(at, column: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if column in d.value.columns)


def chart_specs(at) -> list[dict]:
    import json

    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def chart_axes(at) -> list[str]:
    return [spec["layout"]["xaxis"]["title"]["text"] for spec in chart_specs(at)]


def test_a_profile_shows_each_backend_in_its_unit_the_top_nodes_and_a_failed_backend():
    profile = cnn_profile()
    at = with_profiles(("simulator", profile))
    said = texts(at)
    assert "simulated HTP cycles" in said
    assert profile.backends["gpu"].reason in said  # the failed GPU says why; the others are kept
    assert any("failed" in m.value for m in at.markdown)
    htp_total = next(m for m in at.metric if "simulated HTP cycles" in m.label)
    assert htp_total.value.replace(",", "").startswith(str(round(profile.backends["htp"].total)))
    axes = chart_axes(at)
    assert "simulated HTP cycles" in axes and any("µs" in a for a in axes)
    assert not any(" ms" in a or "seconds" in a for a in axes), axes  # cycles are never turned into time
    top = next(spec for spec in chart_specs(at) if spec["layout"]["title"]["text"] == "Top nodes · simulated HTP cycles")
    bars = top["data"][0]["y"]
    assert bars[-1] == "Transpose (inserted)"  # the costliest, on top
    assert "/features.3/features.3/Conv (+2 fused)" in bars


def test_the_node_table_lists_every_row_with_its_kind_of_figure_and_downloads_as_csv():
    profile = cnn_profile()
    at = with_profiles(("simulator", profile))
    table = frame_with(at, "serves")
    assert len(table) == len(profile.nodes)
    figures = dict(zip(table["name"], table["figure"]))
    assert figures["Transpose"] == "simulated HTP cycles" and "µs" in figures["/classifier/Softmax"]
    assert bool(table.loc[table["name"] == "Transpose", "inserted"].iloc[0])
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download the node table (CSV)" in labels and "Download the profile (JSON)" in labels


def test_the_cpu_fallback_stands_next_to_the_copies_it_causes():
    at = with_profiles(("simulator", cnn_profile()))
    table = frame_with(at, "tensors crossing")
    softmax = table[table["node"] == "/classifier/Softmax"].iloc[0]
    # Softmax's input comes from the Gemm on the HTP; its output is a graph output (the application's anyway)
    assert softmax["tensors crossing"] == 1 and "HTP /classifier/fc/Gemm" in softmax["with"]
    # the file declares no shape for the Gemm's output and no partition ran: its size is unknown, not 0
    assert softmax["unknown sizes"] == 1 and pd.isna(softmax["bytes copied"])
    assert softmax["µs (median)"] == pytest.approx(cnn_profile().node("/classifier/Softmax").median)


def test_an_ai_hub_import_says_where_it_was_measured_and_counts_the_unmatched_layers():
    imported = aihub_profile("Galaxy Test Phone")
    at = with_profiles(("hub", imported))
    said = texts(at)
    assert "Measured on **Galaxy Test Phone** by AI Hub" in said
    assert "1 layer(s)** of the file could not be placed" in said
    assert list(frame_with(at, "compute_unit")["name"]) == [u.name for u in imported.unmatched]
    assert "simulated" not in " ".join(chart_axes(at))


def _scaled(profile, factor: float):
    """``profile`` with every HTP figure times ``factor`` (as fp16 off might)."""
    nodes = [dataclasses.replace(n, median=n.median * factor) if n.backend == "htp" else n for n in profile.nodes]
    return dataclasses.replace(profile, nodes=nodes)


def test_compare_shows_per_node_and_per_op_type_differences():
    a, b = cnn_profile(), _scaled(cnn_profile(), 2.0)
    at = with_profiles(("fp16", a), ("fp32", b))
    at.selectbox(key="pf_cmp_a").set_value("#1 fp16")
    at.selectbox(key="pf_cmp_b").set_value("#2 fp32").run()
    nodes = frame_with(at, "share_change")
    conv = a.node("/features.3/features.3/Conv")
    row = nodes[nodes["name"] == conv.name].iloc[0]
    assert row["b"] - row["a"] == pytest.approx(conv.median) and row["ratio"] == pytest.approx(2.0)
    assert "Share of the HTP total per node" in chart_specs(at)[-1]["layout"]["title"]["text"]
    at.radio(key="pf_cmp_by").set_value("op_type").run()
    ops = frame_with(at, "share_change")
    transpose = ops[ops["op_type"] == "Transpose"].iloc[0]
    assert transpose["b"] == pytest.approx(2 * a.node("Transpose").median)
    at.selectbox(key="pf_cmp_backend").set_value("cpu").run()  # the CPU EP's µs, unchanged
    cpu = frame_with(at, "share_change")
    assert list(cpu["ratio"]) == [pytest.approx(1.0)]


def test_compare_never_divides_a_phones_microseconds_by_simulated_cycles():
    at = with_profiles(("simulator", cnn_profile()), ("hub", aihub_profile()))
    at.selectbox(key="pf_cmp_a").set_value("#1 simulator")
    at.selectbox(key="pf_cmp_b").set_value("#2 hub").run()
    nodes = frame_with(at, "share_change")
    both = nodes[nodes["a"].notna() & nodes["b"].notna()]
    assert len(both) and both["ratio"].isna().all()
    assert "different units" in texts(at)


def test_the_cost_overlay_shades_each_backend_and_marks_the_cpu_fallback():
    graph = load_model(SAMPLE)
    profile = cnn_profile()
    overlays = me.cost_overlays(graph, profile)
    ids = {n.name: me.node_id(n) for n in graph.nodes}
    cost = overlays[me.COST_OVERLAY].results
    costliest = max((r for r in profile.nodes if r.backend == "htp" and not r.inserted), key=lambda r: r.share)
    assert cost[ids[costliest.name]].bgColor == me._mix(*me.COST_GRADIENTS["htp"], costliest.share)  # its share
    member = "/features.3/features.3/Relu"  # fused into the Conv's group: drawn with its group's share
    assert cost[ids[member]].value == cost[ids[costliest.name]].value
    assert cost[ids["/classifier/Softmax"]].bgColor == me.COST_GRADIENTS["cpu"][1]  # the CPU's only node
    fallback = overlays[me.FALLBACK_OVERLAY].results
    assert list(fallback) == [ids["/classifier/Softmax"]]
    assert fallback[ids["/classifier/Softmax"]].value == pytest.approx(profile.node("/classifier/Softmax").median, abs=0.1)
    attrs = {k.key: k.value for k in me.cost_attrs(profile)[member]}
    assert "HTP fused group" in attrs and "/features.3/features.3/Conv" in attrs["HTP fused group"]
    served = {k.key: k.value for k in me.cost_attrs(profile)["/features.0/features.0/Conv"]}
    assert "simulated HTP cycles" in served["HTP inserted for it"]


def test_the_fallback_counts_bytes_it_knows_and_never_guesses_the_others():
    from dashboard.intake.shapes import TensorShape

    graph = load_model(SAMPLE)
    softmax = next(n for n in graph.nodes if n.name == "/classifier/Softmax")
    known = profile_views.fallbacks(cnn_profile(), graph, {softmax.inputs[0]: TensorShape("float32", (1, 10))})
    assert known[0].copy_bytes == 40 and known[0].unknown == 0
    unknown = profile_views.fallbacks(cnn_profile(), graph, {})
    assert unknown[0].unknown + bool(unknown[0].copy_bytes) == 1


def test_a_real_profile_on_the_htp_simulator_through_the_page():
    at = page_with_model("profile", SAMPLE, "cnn", timeout=TIMEOUT)
    assert "No profile yet" in texts(at)
    at.number_input(key=f"pf_runs_{at.session_state['selected_model'].digest}").set_value(3)
    at.button(key="pf_run").click()
    settle(at, JOB, timeout=TIMEOUT)
    entries = at.session_state["profile_runs"]
    assert len(entries) == 1
    profile = entries[0]["profile"]
    failed = {b.reason for b in profile.backends.values() if not b.ok}  # the GPU, on a host without one
    assert {e.value.replace("\\", "") for e in at.error} <= failed, texts(at)
    htp = profile.backends["htp"]
    assert htp.ok and htp.unit == "cycles" and profile.runs == 3
    rows = profile.backend_nodes("htp")
    # each run's node cycles add up to its total, so the per-node extremes bracket the totals' extremes
    assert rows and sum(r.min for r in rows) <= htp.total_min + 1 and sum(r.max for r in rows) >= htp.total_max - 1
    said = texts(at)
    if htp.hardware == "HTP simulator (x86_64)":
        assert "simulated HTP cycles" in said and "simulated HTP cycles" in chart_axes(at)
    assert len(frame_with(at, "serves")) == len(profile.nodes)


def test_an_uploaded_ai_hub_profile_joins_the_session_and_a_malformed_one_is_one_error():
    import json

    from test_profile_aihub import LAYERS, download_profile

    at = with_profiles(("simulator", cnn_profile()))
    digest = at.session_state["selected_model"].digest
    at.text_input(key=f"pf_aihub_device_{digest}").set_value("Galaxy Test Phone")
    at.file_uploader(key=f"pf_aihub_{digest}").upload("hub.json", json.dumps(download_profile(LAYERS)).encode()).run()
    assert not at.exception and not at.error, texts(at)
    entries = at.session_state["profile_runs"]
    assert len(entries) == 2 and entries[-1]["profile"].source == "imported"
    said = texts(at)
    assert "Measured on **Galaxy Test Phone** by AI Hub" in said
    unmatched = len(entries[-1]["profile"].unmatched)
    assert unmatched and f"{unmatched} layer(s)** of the file could not be placed" in said

    at.file_uploader(key=f"pf_aihub_{digest}").upload("broken.json", b'{"execution_detail": ').run()
    assert not at.exception
    error = at.error[0].value.replace("\\", "") if len(at.error) == 1 else texts(at)
    assert error.startswith("broken.json: not an AI Hub profile (not JSON"), error
    assert len(at.session_state["profile_runs"]) == 2  # nothing the user had is lost


def test_an_upload_over_the_cap_is_one_short_error_and_loses_nothing():
    """An AI Hub upload larger than ``MAX_FILE_BYTES`` (before: the page took up to 2 GB), and one
    whose layer name is long, each give one short error; the session's profiles stay."""
    import json

    from dashboard.profile import aihub
    from test_profile_aihub import LAYERS, download_profile

    at = with_profiles(("simulator", cnn_profile()))
    digest = at.session_state["selected_model"].digest
    uploader = f"pf_aihub_{digest}"
    before = [e.value for e in at.error]
    at.file_uploader(key=uploader).upload("big.json", b" " * (aihub.MAX_FILE_BYTES + 1)).run()
    assert not at.exception
    [error] = [e.value.replace("\\", "") for e in at.error if e.value not in before]
    assert f"read up to {aihub.MAX_FILE_BYTES >> 20} MB" in error and len(error) < 300, error[:300]
    named = download_profile([dict(LAYERS[1], name="x" * (4 << 20))])
    at.file_uploader(key=uploader).upload("x" * 5000 + ".json", json.dumps(named).encode()).run()
    assert not at.exception
    [error] = [e.value.replace("\\", "") for e in at.error if e.value not in before]
    assert f"at most {aihub.MAX_TEXT}" in error and len(error) < 300, error[:300]
    assert len(at.session_state["profile_runs"]) == 1  # nothing the user had is lost


def test_a_profile_keeps_running_while_the_user_is_on_another_page():
    at = page_with_model("profile", SAMPLE, "cnn", timeout=TIMEOUT)
    at.number_input(key=f"pf_runs_{at.session_state['selected_model'].digest}").set_value(2)
    at.button(key="pf_run").click().run()
    job = at.session_state[JOB]
    at.switch_page("pages/overview.py").run()  # leaving the page neither stops nor loses the run
    assert not at.exception
    job.wait(TIMEOUT)
    assert job.done and job.result is not None and not job.cancelled, job.error
    at.switch_page("pages/profile.py").run()
    assert not at.exception
    entries = at.session_state["profile_runs"]
    assert [e["profile"] for e in entries] == [job.result["profile"]]
    assert "Profiled in" in texts(at)


HANGING_WORKER = ("import time, dashboard.runtime.protocol as m, dashboard.partition.protocol as p, "
                  "dashboard.profile.protocol, dashboard.runtime.worker as w\n"
                  "def hang(args, emit):\n"
                  "    emit(p.Stage('profiling', 0.3, 'htp'))\n"
                  "    time.sleep(600)\n"
                  "m.COMMANDS['profile'] = m.COMMANDS['profile']._replace(handler='__main__:hang')\nw.serve()")


def test_a_running_profile_shows_its_step_and_cancel_stops_it_keeping_the_earlier_profiles(tmp_path):
    import partition_models as pm

    from dashboard.runtime.devices import Device

    hanging = pm.worker_device(tmp_path, HANGING_WORKER)
    at = with_profiles(("earlier", cnn_profile()))
    at.session_state["devices"] = {"local": Device.parse("local"), hanging.url: hanging}
    at.session_state["device_current"] = hanging.url  # as picked on the Devices page
    at.run()
    at.button(key="pf_run").click().run()
    job = at.session_state[JOB]
    wait_until(lambda: job.stage == "profiling", "the hanging worker reporting its profile")
    at.run()
    progress = at.get("progress")
    assert progress and "profiling" in progress[0].proto.text and "elapsed" in progress[0].proto.text
    assert "Time left: estimated once the first runs are done" in texts(at)  # no run, no earlier profile
    earlier = at.session_state["profile_runs"][0]
    earlier.update(key=job.key, seconds=100.0)  # as if it had been this profile's settings, 100 s long
    at.run()
    assert "going by the last profile with these settings (1 min 40 s)" in texts(at)
    at.button(key=f"{JOB}_cancel").click().run()
    job.wait(30)
    assert job.done and job.cancelled
    settle(at, JOB)
    assert any("Cancelled after" in i.value for i in at.info)
    assert [e["label"] for e in at.session_state["profile_runs"]] == ["#1 earlier"]  # nothing lost
    assert frame_with(at, "serves").shape[0] == len(cnn_profile().nodes)


def test_the_sidebars_html_report_holds_the_sessions_profiles():
    from dashboard.intake.digest import file_digest
    from dashboard.views.report import report_file
    from dashboard.views.state import SelectedModel

    selected = SelectedModel(str(SAMPLE), "cnn", file_digest(SAMPLE), "sample")
    _, build = report_file(selected, load_model(SAMPLE), list, list, profiles=lambda: [cnn_profile()])
    html = build()
    assert "Where the time goes" in html and "simulated HTP cycles" in html
    _, without = report_file(selected, load_model(SAMPLE), list, list)
    assert "Where the time goes" not in without()


def test_the_reports_top_nodes_chart_is_the_pages_with_its_labels():
    """Issue 27, item 6: the report drew its own top-nodes chart, without the "(inserted)" and
    "(+N fused)" labels of the page's. Now one chart: every label the page shows is in the report."""
    import json as json_module

    from dashboard.intake.digest import file_digest
    from dashboard.views.report import report_file
    from dashboard.views.state import SelectedModel

    page_labels = profile_views.top_nodes(cnn_profile(), "htp").to_dict()["data"][0]["y"]
    assert any(label.endswith(" (inserted)") for label in page_labels)
    assert any(label.endswith(" (+2 fused)") for label in page_labels)
    selected = SelectedModel(str(SAMPLE), "cnn", file_digest(SAMPLE), "sample")
    _, build = report_file(selected, load_model(SAMPLE), list, list, profiles=lambda: [cnn_profile()])
    html = build()
    for label in page_labels:  # as plotly writes them into the page (its JSON escapes "/")
        assert json_module.dumps(label)[1:-1].replace("/", "\\u002f") in html, label


def test_names_from_the_file_reach_the_charts_as_text():
    hostile = "<a href='javascript:alert(1)'>x</a>"
    profile = cnn_profile()
    profile.nodes[0].name = hostile  # the inserted Transpose, the costliest row
    figure = profile_views.top_nodes(profile, "htp").to_dict()
    labels, hover = figure["data"][0]["y"], figure["data"][0]["hovertext"]
    assert all("<a" not in text for text in [*labels, *hover]) and "&lt;a href=" in labels[-1]
    assert "<br>" in hover[-1]  # the line breaks the chart adds itself stay


# A worker that reports run 1, then run 2 once the file GATE exists (the page has seen run 1), and
# then hangs until it is stopped.
PACED_WORKER = ("import os, threading, time, dashboard.runtime.protocol as m, dashboard.partition.protocol as p, "
                "dashboard.profile.protocol, dashboard.runtime.worker as w\n"
                "def runs(args, emit):\n"
                "    emit(p.Stage('run 1 of 10 (timed)', 0.17, 'htp'))\n"
                "    while not os.path.exists(GATE):\n"
                "        time.sleep(0.05)\n"
                "    emit(p.Stage('run 2 of 10 (timed)', 0.24, 'htp'))\n"
                "    threading.Event().wait()\n"
                "m.COMMANDS['profile'] = m.COMMANDS['profile']._replace(handler='__main__:runs')\nw.serve()")


def test_the_time_left_follows_the_pace_of_the_runs(tmp_path):
    import partition_models as pm

    from dashboard.runtime.devices import Device

    gate = tmp_path / "run-2"
    paced = pm.worker_device(tmp_path, f"GATE = {str(gate)!r}\n" + PACED_WORKER)
    at = page_with_model("profile", SAMPLE, "cnn", timeout=120)
    at.session_state["devices"] = {"local": Device.parse("local"), paced.url: paced}
    at.session_state["device_current"] = paced.url
    at.run()
    at.button(key="pf_run").click().run()
    job = at.session_state[JOB]
    for run in (1, 2):  # the page sees each run as the browser's progress box would
        wait_until(lambda: job.stage.startswith(f"run {run} of 10"), f"the worker reporting run {run}")
        at.run()
        gate.touch()  # run 2 is reported only once the page has seen run 1
    assert "left for the runs, going by their pace so far" in texts(at)
    at.button(key=f"{JOB}_cancel").click().run()
    job.wait(DEADLINE)
    assert job.done and job.cancelled


def test_every_microsecond_figure_of_the_simulator_says_it_is_host_time_not_the_npus():
    at = with_profiles(("simulator", cnn_profile()))
    table = frame_with(at, "phase")
    us = table[table["unit"] == "us"]
    assert len(us) >= 4  # QNN execute, the finalize phases, power-on, VTCM acquire
    assert (us["what"] == "HTP simulator's time on this host, not the NPU's").all()


def _compare_sides_app():
    """The Compare page's profile section alone (its partition analyses need the simulator)."""
    from dashboard.views import profile as profile_view

    profile_view.compare_sides(("d" * 32, "d" * 32), ("A: cnn", "B: cnn"))


def test_the_compare_pages_section_puts_two_profiles_of_the_sides_side_by_side():
    from streamlit.testing.v1 import AppTest

    a, b = cnn_profile(), _scaled(cnn_profile(), 2.0)
    now = datetime.now(timezone.utc)
    at = AppTest.from_function(_compare_sides_app, default_timeout=60)
    at.run()
    assert "No profile of A: cnn or B: cnn" in texts(at)  # none yet: says where to make one
    at.session_state["profile_runs"] = [{"label": f"#{i + 1} {w}", "profile": p, "digest": "d" * 32, "name": "cnn",
                                         "device": "local", "finished": now, "what": w}
                                        for i, (w, p) in enumerate((("fp16", a), ("fp32", b)))]
    at.run()
    assert not at.exception, at.exception
    assert "Where the time goes" in texts(at)
    assert at.selectbox(key="cmp_pf_a").value == "#1 fp16" and at.selectbox(key="cmp_pf_b").value == "#2 fp32"
    nodes = frame_with(at, "share_change")
    conv = a.node("/features.3/features.3/Conv")
    assert nodes[nodes["name"] == conv.name].iloc[0]["ratio"] == pytest.approx(2.0)
    device = cnn_profile()
    device.backends["htp"].hardware = "Snapdragon 8 Gen 3 NPU"
    at.session_state["profile_runs"][1]["profile"] = device
    at.run()
    assert frame_with(at, "share_change")["ratio"].isna().all() and "different hardware" in texts(at)


def test_the_overlay_keeps_the_eps_inserted_rows_and_paints_a_share_as_itself():
    graph = load_model(SAMPLE)
    profile = cnn_profile()
    overlays = me.cost_overlays(graph, profile)
    ids = {n.name: me.node_id(n) for n in graph.nodes}
    first = "/features.0/features.0/Conv"
    transpose, group = profile.node("Transpose"), profile.node(first)
    cost = overlays[me.COST_OVERLAY].results[ids[first]]
    assert cost.value == pytest.approx(round((transpose.share + group.share) * 100, 2))
    assert overlays[me.INSERTED_OVERLAY].results[ids[first]].value == pytest.approx(round(transpose.share * 100, 2))
    small = max((r for r in profile.nodes if r.backend == "htp" and not r.inserted and r.serves is None
                 and r.name != first), key=lambda r: r.share)
    drawn = overlays[me.COST_OVERLAY].results[ids[small.name]]
    assert small.share < 0.5 and drawn.bgColor == me._mix(*me.COST_GRADIENTS["htp"], small.share)
    assert drawn.bgColor != me.COST_GRADIENTS["htp"][1]  # a small share is not painted as the darkest
    served = {k.key: k.value for k in me.cost_attrs(profile)[first]}
    assert "the cost overlay includes its" in served["HTP inserted for it"]
