"""The Profile page under AppTest, the cost overlays of the Partitions graph, and the comparison of
two profiles.

Most tests draw hand-built profiles (``profile_fixtures``: a profile of the CNN sample with the
EP's inserted Transpose, fused groups, a CPU-fallback node and a failed GPU; an AI Hub import), put
into the session as a finished run would leave them, so they need no simulator. One test runs a
real profile of the CNN sample on the HTP simulator through the page's button and job.
"""

from __future__ import annotations

import dataclasses
import io
from datetime import datetime, timezone

import pandas as pd
import pytest
from page_jobs import page_with_model, settle
from profile_fixtures import aihub_profile, cnn_profile

from dashboard.intake.reader import load_model
from dashboard.intake.samples import sample_path
from dashboard.render import model_explorer as me
from dashboard.render import profile_views
from dashboard.render.profile_diff import node_diff, op_type_diff

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
    assert "/features.3/features.3/Relu (+2 fused)" in bars


def test_the_node_table_downloads_as_csv_with_every_row():
    profile = cnn_profile()
    at = with_profiles(("simulator", profile))
    table = frame_with(at, "serves")
    assert len(table) == len(profile.nodes)
    button = next(b for b in at.get("download_button") if b.proto.label == "Download the node table (CSV)")
    assert button.proto.label
    csv = pd.read_csv(io.StringIO(profile.frame().to_csv(index=False)))
    assert set(csv["name"]) == {n.name for n in profile.nodes}


def test_the_cpu_fallback_stands_next_to_the_copies_it_causes():
    at = with_profiles(("simulator", cnn_profile()))
    table = frame_with(at, "tensors crossing")
    softmax = table[table["node"] == "/classifier/Softmax"].iloc[0]
    # Softmax's input comes from the Gemm on the HTP; its output is a graph output (the application's anyway)
    assert softmax["tensors crossing"] == 1 and "HTP /classifier/fc/Gemm" in softmax["with"]
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


def test_compare_shows_per_node_and_per_op_type_differences_of_one_unit_only():
    a, b = cnn_profile(), _scaled(cnn_profile(), 2.0)
    at = with_profiles(("fp16", a), ("fp32", b))
    at.selectbox(key="pf_cmp_a").set_value("#1 fp16")
    at.selectbox(key="pf_cmp_b").set_value("#2 fp32").run()
    nodes = frame_with(at, "B − A")
    row = nodes[nodes["node"] == "/features.3/features.3/Relu"].iloc[0]
    relu = a.node("/features.3/features.3/Relu")
    assert row["B − A"] == pytest.approx(relu.median) and row["B / A"] == pytest.approx(2.0)
    softmax = nodes[nodes["node"] == "/classifier/Softmax"].iloc[0]
    assert softmax["B − A"] == 0
    ops = frame_with(at, "total A")
    transpose = ops[ops["op type"] == "Transpose"].iloc[0]
    assert transpose["total B"] == pytest.approx(2 * a.node("Transpose").median)


def test_compare_never_subtracts_a_phones_figures_from_simulated_cycles():
    at = with_profiles(("simulator", cnn_profile()), ("hub", aihub_profile()))
    at.selectbox(key="pf_cmp_a").set_value("#1 simulator")
    at.selectbox(key="pf_cmp_b").set_value("#2 hub").run()
    nodes = frame_with(at, "B − A")
    both = nodes[(nodes["A"] != "—") & (nodes["B"] != "—")]
    assert len(both) and both["B − A"].isna().all()
    assert all(note.startswith("not comparable") for note in both["note"])


def test_the_diff_keeps_units_and_hardware_apart():
    a, b = cnn_profile(), _scaled(cnn_profile(), 0.5)
    rows = node_diff(a.nodes, b.nodes, {"htp": "sim", "cpu": "x86"}, {"htp": "sim", "cpu": "x86"})
    assert rows[0].name == "Transpose" and rows[0].delta == pytest.approx(-a.node("Transpose").median / 2)
    moved = dataclasses.replace(b, nodes=[dataclasses.replace(n, backend="cpu", unit="us", median=50.0)
                                          if n.name == "/classifier/fc/Gemm" else n for n in b.nodes])
    gemm = next(r for r in node_diff(a.nodes, moved.nodes) if r.name == "/classifier/fc/Gemm")
    assert gemm.delta is None and "cycles against us" in gemm.note
    ops = op_type_diff(a.nodes, moved.nodes)
    assert {(r.op_type, r.unit) for r in ops if r.op_type == "Gemm"} == {("Gemm", "cycles"), ("Gemm", "us")}


def test_the_cost_overlay_shades_each_backend_and_marks_the_cpu_fallback():
    graph = load_model(SAMPLE)
    profile = cnn_profile()
    overlays = me.cost_overlays(graph, profile)
    ids = {n.name: me.node_id(n) for n in graph.nodes}
    cost = overlays[me.COST_OVERLAY].results
    costliest = max((r for r in profile.nodes if r.backend == "htp" and not r.inserted), key=lambda r: r.share)
    assert cost[ids[costliest.name]].bgColor == me.COST_GRADIENTS["htp"][1]  # the darkest blue
    member = "/features.3/features.3/Conv"  # fused into the Relu: drawn with its group's share
    assert cost[ids[member]].value == cost[ids[costliest.name]].value
    assert cost[ids["/classifier/Softmax"]].bgColor == me.COST_GRADIENTS["cpu"][1]  # the CPU's only node
    fallback = overlays[me.FALLBACK_OVERLAY].results
    assert list(fallback) == [ids["/classifier/Softmax"]]
    assert fallback[ids["/classifier/Softmax"]].value == pytest.approx(profile.node("/classifier/Softmax").median, abs=0.1)
    attrs = {k.key: k.value for k in me.cost_attrs(profile)[member]}
    assert "HTP fused group" in attrs and "/features.3/features.3/Relu" in attrs["HTP fused group"]
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
    assert rows and sum(r.median for r in rows) == pytest.approx(htp.total, rel=0.01)
    said = texts(at)
    if htp.hardware == "HTP simulator (x86_64)":
        assert "simulated HTP cycles" in said and "simulated HTP cycles" in chart_axes(at)
    assert len(frame_with(at, "serves")) == len(profile.nodes)
