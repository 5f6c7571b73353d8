"""End to end: the Partitions page of the real app (``streamlit run``) in headless Chromium.

A user opens a model whose Erf and Mod(fmod=1) nodes QNN refuses, reads which nodes keep it off
the NPU and why, checks the GPU figures are labelled predicted, opens the graph (Model Explorer), and flips a knob
to see the difference against the previous run. (The README's screenshot is made by
``scripts/screenshot_partitions.py`` on the bundled LLM decoder.)
"""

from __future__ import annotations

import partition_models as pm
import pytest
from e2e_helpers import launch_chromium, open_page, require_chromium, running_app, wait_for_idle

pytestmark = pytest.mark.timeout(420)

VIEWPORT = {"width": 1600, "height": 1000}
ANALYSIS_TIMEOUT = 300


def table_text(page, index: int) -> str:
    return page.locator('[data-testid="stDataFrame"]').nth(index).locator("table").text_content()


def test_partitions_page_answers_which_nodes_keep_the_model_off_the_npu(tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with running_app("--model", str(model), env=env) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(app.url)
            wait_for_idle(page)
            open_page(page, "Partitions", timeout=ANALYSIS_TIMEOUT)
            heading = page.get_by_role("heading", name="2 node(s) keep the model off the NPU")
            heading.wait_for(timeout=ANALYSIS_TIMEOUT * 1000)  # the analysis runs in the worker meanwhile
            off_npu = table_text(page, 0)
            assert "erf0" in off_npu and "Operators of type `Erf` are not supported" in off_npu
            assert "mod0" in off_npu and "fmod == 0" in off_npu
            assert page.get_by_text("predicted", exact=True).first.is_visible()  # the GPU badge
            page.get_by_role("tab", name="Graph").click()
            wait_for_idle(page)
            viewer = page.frame_locator('iframe[title*="model_explorer"]')  # tests/test_viewer_e2e.py drives it
            viewer.get_by_text("HTP (measured)", exact=True).first.wait_for(timeout=120_000)
            page.screenshot(path=str(tmp_path / "partitions.png"))
            # a knob: analyse the file's graph as it is; the page compares with the previous run
            page.locator('[data-testid="stExpander"]').filter(has_text="Analysis options").locator("summary").click()
            wait_for_idle(page)
            box = page.locator('[data-testid="stSelectbox"]').filter(has_text="ONNX Runtime optimization level")
            box.locator("input").click()  # Streamlit's selectbox is a combobox: open its list
            page.keyboard.press("ArrowDown")
            page.get_by_role("option", name="disabled", exact=True).click()
            compared = page.locator('[data-testid="stMarkdownContainer"]').filter(
                has_text="Compared with the previous run")
            compared.wait_for(timeout=ANALYSIS_TIMEOUT * 1000)
            assert "optimization" in compared.inner_text() and "disabled" in compared.inner_text()
        finally:
            browser.close()
