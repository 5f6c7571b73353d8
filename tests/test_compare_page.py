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
    assert "Same model: **2** node(s) are off the NPU on one side only." in text  # B's HTP measured nothing
    only = next(df.value for df in at.dataframe if "off the NPU only in" in df.value.columns)
    assert set(only["node"]) == {"erf0", "mod0"} and set(only["off the NPU only in"]) == {"A"}
    assert len(at.session_state["partition_reports"]) == 2  # shared with the Partitions page
    assert any("No timeline run" in i.value for i in at.info)


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
