"""End to end: the Partitions page of the real app (``streamlit run``) in headless Chromium.

A user opens a model whose Erf and Mod(fmod=1) nodes QNN refuses, reads which nodes keep it off
the NPU and why, checks the GPU figures are labelled predicted, opens the graph (Model Explorer), and changes an
option and applies it to see the difference against the previous run. (The README's screenshot is made by
``scripts/screenshot_partitions.py`` on the bundled LLM decoder.)
"""

from __future__ import annotations

import re
from pathlib import Path

import partition_models as pm
import pytest
from e2e_helpers import app_in_browser, open_page, wait_for_idle

pytestmark = pytest.mark.timeout(420)

VIEWPORT = {"width": 1600, "height": 1000}
ANALYSIS_TIMEOUT = 300


def worker_children(parent: int) -> list[int]:
    """The runtime worker processes the dashboard process ``parent`` started (Linux /proc)."""
    out = []
    for entry in (p for p in Path("/proc").iterdir() if p.name.isdigit()):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and "dashboard.runtime.worker" in cmdline:
            out.append(int(entry.name))
    return out


def table_text(page, index: int) -> str:
    return page.locator('[data-testid="stDataFrame"]').nth(index).locator("table").text_content()


def test_partitions_page_answers_which_nodes_keep_the_model_off_the_npu(tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with app_in_browser("--model", str(model), viewport=VIEWPORT, env=env) as (_, page):
        open_page(page, "Partitions", timeout=ANALYSIS_TIMEOUT)
        heading = page.get_by_role("heading", name="2 node(s) keep the model off the NPU")
        heading.wait_for(timeout=ANALYSIS_TIMEOUT * 1000)  # the analysis runs in the worker meanwhile
        groups, off_npu = table_text(page, 0), table_text(page, 1)  # by op and reason first, then each node
        assert "fix to try" in groups and "Erf" in groups and "fmod == N" in groups  # the reason's pattern
        assert "erf0" in off_npu and "Operators of type `Erf` are not supported" in off_npu
        assert "mod0" in off_npu and "fmod == 0" in off_npu  # the EP's own words, per node
        assert page.get_by_text("predicted", exact=True).first.is_visible()  # the GPU badge
        page.get_by_role("tab", name="Graph").click()
        wait_for_idle(page)
        viewer = page.frame_locator('iframe[title*="model_explorer"]')  # tests/test_viewer_e2e.py drives it
        viewer.get_by_text("HTP (measured)", exact=True).first.wait_for(timeout=120_000)
        page.screenshot(path=str(tmp_path / "partitions.png"))
        # an option: analyse the file's graph as it is; nothing runs until Apply, then the page
        # compares with the previous run
        box = page.locator('[data-testid="stSelectbox"]').filter(has_text="ONNX Runtime optimization level")
        box.locator("input").click()  # Streamlit's selectbox is a combobox: open its list
        page.keyboard.press("ArrowDown")
        page.get_by_role("option", name="disabled", exact=True).click()
        wait_for_idle(page)
        compared = page.locator('[data-testid="stMarkdownContainer"]').filter(
            has_text="Compared with the previous run")
        assert compared.count() == 0  # not applied yet
        page.get_by_role("button", name="Apply").click()
        compared.wait_for(timeout=ANALYSIS_TIMEOUT * 1000)
        assert "optimization" in compared.inner_text() and "disabled" in compared.inner_text()
        wait_for_idle(page)
        # downloads are named after the model, and the sidebar's report has both analyses
        with page.expect_download() as json_download:
            page.get_by_role("button", name="Download the report (JSON)").click()
        assert re.fullmatch(r"rejects-partitions-\d{8}T\d{6}Z\.json", json_download.value.suggested_filename)
        assert not page.locator('[data-testid="stStatusWidget"]').count()  # a download does not rerun the page
        with page.expect_download(timeout=120_000) as html_download:
            page.get_by_role("button", name="Report (HTML)").click()
        assert re.fullmatch(r"rejects-report-\d{8}T\d{6}Z\.html", html_download.value.suggested_filename)
        document = Path(html_download.value.path()).read_text(encoding="utf-8")
        assert document.count("2 node(s) keep the model off the NPU") == 2  # both option sets


def test_a_long_analysis_shows_its_step_and_time_and_cancel_stops_its_worker(tmp_path):
    """A 20,000-node decoder takes minutes to compile on the HTP simulator: the page stays usable,
    shows the step and the seconds elapsed, and Cancel kills the worker process at once."""
    import onnx

    from dashboard.intake.samples import build_decoder

    model = tmp_path / "decoder_20k.onnx"
    onnx.save(build_decoder(20_000), model)
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with app_in_browser("--model", str(model), viewport=VIEWPORT, env=env) as (app, page):
        page.locator('[data-testid="stSidebar"] [data-testid="stPageLink-NavLink"]').filter(
            has_text=re.compile(r"Partitions$")).click()
        progress = page.locator('[data-testid="stProgress"]').filter(has_text="creating the HTP session")
        progress.wait_for(timeout=120_000)
        first = int(re.search(r"(\d+) s elapsed", progress.inner_text()).group(1))
        page.wait_for_timeout(2500)
        later = int(re.search(r"(\d+) s elapsed", progress.inner_text()).group(1))
        assert later > first  # the clock runs while QNN compiles
        workers = worker_children(app.process.pid)
        assert len(workers) == 1
        page.get_by_role("button", name="Cancel").click()
        page.get_by_text("Cancelled after").wait_for(timeout=30_000)
        assert not worker_children(app.process.pid)  # stopped, not left compiling for minutes
        assert page.get_by_role("button", name="Apply").is_visible()  # nothing restarts until Apply
