"""The Sweep page in Chromium against a real dashboard server: a results folder under the
operator's sweep root opens as the coverage matrix, switching to the second run shows the model
that lost coverage, and the diff tab says its gate trips."""

from __future__ import annotations

from e2e_helpers import choose_option, launch_chromium, open_page, require_chromium, running_app, wait_for_idle
from test_sweep_page import two_runs

VIEWPORT = {"width": 1600, "height": 1100}


def matrix_text(page) -> str:
    """The matrix grid's cells (it draws on a canvas; its accessible table has the text)."""
    return page.locator('[data-testid="stDataFrame"]').first.locator("table").text_content()


def test_the_sweep_page_draws_the_matrix_and_the_diff_in_the_browser(tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    base = two_runs(tmp_path / "sweeps")
    with running_app(env={"QNN_LAB_SWEEP_ROOTS": str(base)}) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            app.open(page)
            wait_for_idle(page)
            open_page(page, "Sweep")
            assert page.get_by_role("heading", name="Sweep").is_visible()
            choose_option(page, "Results folder", f"{base} › pr-run")
            text = matrix_text(page)
            assert "HTP 75% · 1 on CPU" in text and "HTP 100% · 0 on CPU" in text, text
            assert "sm8650 · default" in text and "models/model_001.onnx" in text
            page.get_by_role("tab", name="Diff two runs").click()
            choose_option(page, "Old (e.g. the release)", f"{base} › zoo.results")
            choose_option(page, "New (e.g. the pull request)", f"{base} › pr-run")
            page.get_by_text("trip a gate").wait_for(timeout=60_000)
            assert "models/model_001.onnx" in page.locator('[data-testid="stCode"]').first.text_content()
        finally:
            browser.close()
