"""End to end: the real app (``streamlit run``) driven in headless Chromium.

A user opens the dashboard (first on a page URL, as a bookmark after a server restart would) on the
default sample, sees its overview with the Netron graph, picks
another sample, reads the classifier's verdicts and evidence table, and uploads a file with hostile
names that must show as text. Screenshots go to ``docs/`` with ``UPDATE_SCREENSHOTS=1`` (for the
README), else to the test's temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from e2e_helpers import ROOT, choose_option, launch_chromium, open_page, require_chromium, running_app, wait_for_idle

from dashboard.intake.samples import SAMPLES

pytestmark = pytest.mark.timeout(300)

VIEWPORT = {"width": 1600, "height": 1000}
SCREENSHOT_HEIGHT = {"overview": 2050, "classifier": 1750}


def screenshot(page, name: str, tmp_path: Path) -> Path:
    """Full-length screenshot of the page (Streamlit scrolls inside its own container, so the
    viewport is grown to the page's height first)."""
    folder = ROOT / "docs" if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path
    page.set_viewport_size({"width": VIEWPORT["width"], "height": SCREENSHOT_HEIGHT[name]})
    wait_for_idle(page)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    page.set_viewport_size(VIEWPORT)
    return path


def sidebar_model(page) -> str:
    return page.locator('[data-testid="stSidebar"] [data-testid="stMarkdown"]').first.inner_text()


def table_text(page, index: int) -> str:
    """Text of the index-th dataframe (the grid draws on a canvas; its accessible table has the cells)."""
    return page.locator('[data-testid="stDataFrame"]').nth(index).locator("table").text_content()


def test_sample_verdict_evidence_and_upload(tmp_path, hostile_layernorm_model):
    require_chromium()
    from playwright.sync_api import sync_playwright

    llm = next(s for s in SAMPLES if s.file_name == "llm_decoder_kv.onnx")
    uploads = {"QNN_LAB_UPLOAD_DIR": str(tmp_path / "uploads")}  # where the app stores the upload
    # Started as `make run` starts it: a relative --model path after `--`.
    with running_app("--model", f"samples/{llm.file_name}", env=uploads) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            # The server's first request names a page: it still gets the app around it.
            app.open(page, "classifier")
            wait_for_idle(page)
            assert page.get_by_role("heading", name="Backend classifier").is_visible()
            assert llm.title in sidebar_model(page)

            # Overview of the default sample, with the Netron graph drawn in its frame.
            open_page(page, "Overview")
            assert page.get_by_role("heading", name="Model overview").is_visible()
            netron = page.frame_locator('[data-testid="stIFrame"]')
            netron.locator("#canvas g.node").first.wait_for(timeout=60_000)
            assert "input_ids" in table_text(page, 0)
            assert screenshot(page, "overview", tmp_path).stat().st_size > 50_000

            # Another sample, then its classification.
            encoder = next(s for s in SAMPLES if s.file_name == "text_encoder.onnx")
            choose_option(page, "Bundled sample", encoder.title)
            assert encoder.title in sidebar_model(page)
            open_page(page, "Classifier")
            main = page.locator('[data-testid="stMain"]')
            assert main.get_by_role("heading", name="EP rules", exact=True).is_visible()
            verdicts = main.locator("h3").all_inner_texts()
            assert any("GenAI" in v and "GPU" in v for v in verdicts)
            assert any("NonGenAI" in v and "HTP" in v for v in verdicts)
            evidence = table_text(page, 0)
            assert "KV cache input names" in evidence and "input 'input_ids'" in evidence
            assert "not reached" in evidence
            assert screenshot(page, "classifier", tmp_path).stat().st_size > 50_000

            # Upload a file whose name and node names are HTML; it becomes the model, shown as text.
            page.locator('[data-testid="stSidebar"] [data-testid="stButtonGroup"]').get_by_text(
                "Upload", exact=True).click()
            wait_for_idle(page)
            page.locator('[data-testid="stSidebar"] input[type="file"]').set_input_files(str(hostile_layernorm_model))
            wait_for_idle(page)
            stored = list((tmp_path / "uploads").glob("*/model.onnx"))
            assert len(stored) == 1 and stored[0].read_bytes() == hostile_layernorm_model.read_bytes()
            assert hostile_layernorm_model.name in sidebar_model(page)  # as text, not as an <img>
            assert "<script>alert('x')</script>" in table_text(page, 0)
            assert page.evaluate("window.__pwned") is None
            assert page.locator('[data-testid="stMain"] img[src="x"], [data-testid="stMain"] script').count() == 0
            assert not page.locator('[data-testid="stException"]').count()
        finally:
            browser.close()
