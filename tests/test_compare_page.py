"""The Compare page under AppTest (real worker, HTP simulator): one model under two option sets,
and two models, side by side; Compare runs as a cancellable job; timelines of this session."""

from __future__ import annotations

from pathlib import Path

import partition_models as pm
import pytest
from page_jobs import settle
from streamlit.testing.v1 import AppTest

from dashboard.intake.digest import file_digest
from dashboard.views.state import SelectedModel

ROOT = Path(__file__).resolve().parent.parent
JOB = "compare_job"


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def page(path: Path) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).switch_page("pages/compare.py")
    at.session_state["selected_model"] = SelectedModel(str(path), path.name, file_digest(path), "path")
    at.session_state["intake_started"] = True
    return at


def said(elements) -> list[str]:
    return [e.value.replace("\\", "") for e in elements]  # markdown escapes model-derived text


def compare(at: AppTest) -> AppTest:
    at.button(key="cmp_apply").click()
    return settle(at, JOB)


def test_one_model_under_two_option_sets(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = settle(page(path), JOB)
    assert not at.error and "then **Compare**" in " ".join(i.value for i in at.info)  # nothing runs by itself
    assert "partition_reports" not in at.session_state or not at.session_state["partition_reports"]  # no analysis
    assert at.toggle(key="cmp_fp16_A").value is True and at.toggle(key="cmp_fp16_B").value is False
    at.toggle(key="cmp_fp16_B").set_value(True)
    at.selectbox(key="cmp_soc_B").set_value("sc8280x")  # the Conv's layout transform fails for this SoC
    compare(at)
    assert not at.exception
    text = said(at.markdown)
    assert "**A: rejects.onnx** · HTP measured on the HTP simulator (x86_64) · GPU predicted" in text or \
        any(t.startswith("**A: rejects.onnx** · HTP measured on the ") for t in text)
    assert "**B: rejects.onnx** · HTP failed · GPU predicted" in text
    assert any("no per-node verdicts" in w for w in said(at.warning))
    # B's HTP failed: its reason is shown, and nothing is claimed about its nodes
    failure = [e for e in said(at.error) if e.startswith("**B: rejects.onnx: HTP failed.**")]
    assert len(failure) == 1 and len(failure[0]) > len("**B: rejects.onnx: HTP failed.** ") + 10, said(at.error)
    assert not any(t.startswith("**B: rejects.onnx**: ") and "node(s)" in t for t in text), text
    assert any(t.startswith("**B: rejects.onnx**: the HTP failed") for t in text)
    assert not any(t.startswith("Same model") for t in text)
    # what tells the sides apart: the SoC's HTP architecture, and what each HTP measured
    facts = next(df.value for df in at.dataframe if "HTP architecture" in df.value.index)
    assert list(facts.loc["HTP architecture"]) == ["v73", "v68"]
    assert list(facts.loc["HTP"])[1] == "failed" and list(facts.loc["HTP"])[0].startswith("measured on the ")
    assert facts.loc["HTP session creation (compile)"].iloc[0].endswith(" s")
    # what B's failed HTP did not measure is "—", never "None" or "nan" beside it (issue 27, item 6)
    assert facts.loc["HTP session creation (compile)"].iloc[1] == facts.loc["QNN subgraphs"].iloc[1] == "—"
    assert not {"None", "nan"} & set(facts.values.ravel())
    assert len(at.session_state["partition_reports"]) == 2  # shared with the Partitions page
    assert any("No timeline run" in i.value for i in at.info)


def test_a_second_comparison_reuses_the_side_already_analysed(tmp_path):
    """Only B's options change: A's report is the one analysed before (not recomputed), and the
    job analyses B alone."""
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = settle(page(path), JOB)
    compare(at)
    reports = at.session_state["partition_reports"]
    first = dict(reports)
    at.selectbox(key="cmp_soc_B").set_value("sm8650")
    compare(at)
    assert not at.exception
    assert set(at.session_state[JOB].result) == {1}  # B only
    reports = at.session_state["partition_reports"]
    a_key = next(k for k in first if reports.get(k) is first[k])
    assert len(reports) == 3 and a_key in reports


def test_each_option_set_shows_its_own_timeline_run(tmp_path):
    """Two runs of one model, fp16 on and off: side A (fp16 on) shows the fp16 run, side B the
    other, never the same one for both."""
    from datetime import datetime, timezone

    from dashboard.timeline.model import StrategyRun, TimelineOptions, TimelineRun

    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = page(path)
    entries = []
    for number, fp16 in ((1, True), (2, False)):
        run = TimelineRun({}, str(path), TimelineOptions(fp16=fp16, strategies=["fast"]).to_json(), {},
                          {"fast": StrategyRun("fast", {"fast": "cpu"})},
                          target={"backend": "htp", **({"context_bytes": 3 * 1024 * 1024} if fp16 else {})})
        entries.append({"label": f"#{number} fp16 {'on' if fp16 else 'off'}", "data": run.to_json(),
                        "finished": datetime.now(timezone.utc), "digest": file_digest(path), "name": path.name,
                        "device": "local"})
    at.session_state["timeline_runs"] = entries
    settle(at, JOB)
    compare(at)
    assert not at.exception
    assert at.selectbox(key="cmp_run_A").options == ["#1 fp16 on"]
    assert at.selectbox(key="cmp_run_B").options == ["#2 fp16 off"]
    facts = next(df.value for df in at.dataframe if "HTP architecture" in df.value.index)
    assert list(facts.loc["EPContext size"]) == ["3.0 MiB", "not measured (run the cached strategy)"]
    tables = [df.value for df in at.dataframe if "first response (s)" in df.value.columns]
    assert len(tables) == 2 and all(t.notna().all().all() for t in tables)  # nothing measured: —, not None
    assert {t["first response (s)"].iloc[0] for t in tables} == {"—"}


def test_two_models_side_by_side(tmp_path):
    rejects = pm.save(pm.rejects_model(), tmp_path, "rejects")
    chain = pm.save(pm.named_chain_model(), tmp_path, "chain")
    at = settle(page(rejects), JOB)
    at.selectbox(key="cmp_model_B").set_value("path")
    at.text_input(key="cmp_path_B").input(str(chain))
    at.toggle(key="cmp_fp16_B").set_value(True)
    compare(at)
    assert not at.error
    off = [t for t in said(at.markdown) if "node(s)" in t and t.startswith("**")]
    assert any("rejects" in m and "2 node(s)" in m for m in off) and any("chain" in m and "1 node(s)" in m for m in off)
    both = [m for m in at.metric if m.label == "both (GPU ∩ HTP)"]
    assert [m.value for m in both] == ["4", "4"] and both[1].delta in (None, "0", "+0")
    verdicts = [t for t in said(at.markdown) if t.startswith("EP rules:")]
    assert len(verdicts) == 2
    assert not any(t.startswith("Same model") for t in said(at.markdown))


def test_a_bad_path_is_one_error_line(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = settle(page(path), JOB)
    at.selectbox(key="cmp_model_A").set_value("path")
    at.text_input(key="cmp_path_A").input(str(tmp_path / "missing.onnx"))
    compare(at)
    assert said(at.error) and "no such file" in said(at.error)[0]
    assert JOB not in at.session_state
