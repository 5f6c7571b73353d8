"""Make the README's Profile screenshot: the bundled CNN profiled on the HTP simulator (fp16,
Snapdragon X Elite), its HTP total, the GPU's failure here and its costliest nodes.

    .venv/bin/python scripts/screenshot_profile.py [OUT.png]

Drives the page as a user does: the dashboard started without a model, the sample picked in the
sidebar (so the sidebar names a bundled sample, not a path on this machine), fp16 and the SoC set
in the Profile form, **Profile** pressed, and the picture taken once the result is drawn. The
cache is a temporary folder of its own, so the run measures afresh.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e_helpers import (choose_option, launch_chromium, open_page, require_chromium,  # noqa: E402
                               running_app, wait_for_idle)

SAMPLE = "CNN image classifier (224x224)"
SOC = "Snapdragon X Elite / X Plus (SC8380XP)"
PROFILE_TIMEOUT_S = 600  # a compile and 11 runs of the CNN on the simulator, on a shared machine
VIEWPORT = {"width": 1600, "height": 2400}  # tall: the results are drawn without scrolling the main pane
TOP_NODES = "Top nodes · simulated HTP cycles"


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "docs" / "profile.png")
    require_chromium()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="profile-shot-") as cache, \
            running_app(env={"QNN_LAB_CACHE": cache}) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            app.open(page)
            wait_for_idle(page)
            open_page(page, "Profile")
            _pick_sample(page)
            _profile(page)
            page.screenshot(path=out, full_page=True, clip=_top_of_results(page))
        finally:
            browser.close()
    print(out)


def _pick_sample(page) -> None:
    """The CNN from the sidebar's Sample source (the startup model is the first sample, the LLM)."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Sample", exact=True).first.click()  # the "Open a model from" source
    wait_for_idle(page)
    choose_option(page, "Bundled sample", SAMPLE)
    page.get_by_role("heading", name="Profile").wait_for()
    page.get_by_text(f"{SAMPLE} · where the time goes").first.wait_for()


def _profile(page) -> None:
    """fp16 on (a float model's default; set if it is not), the SoC picked, Profile pressed, and a
    bounded wait for the result's top-nodes chart."""
    fp16 = page.locator('[data-testid="stCheckbox"]').filter(has_text="HTP fp16 precision").first
    if not fp16.locator("input").is_checked():
        fp16.locator("label").first.click()
    choose_option(page, "Snapdragon SoC", SOC)
    page.get_by_role("button", name="Profile", exact=True).click()
    page.get_by_text("Profiled in").first.wait_for(timeout=PROFILE_TIMEOUT_S * 1000)
    wait_for_idle(page)
    page.get_by_text(TOP_NODES).first.wait_for(timeout=60_000)
    if page.locator('[data-testid="stException"]').count():
        raise RuntimeError("the Profile page shows an exception")
    time.sleep(2)  # plotly lays the chart out after the page is idle


def _top_of_results(page) -> dict:
    """From the top of the page to the foot of the first top-nodes chart (sidebar included)."""
    chart = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
    return {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": chart["y"] + chart["height"] + 16}


if __name__ == "__main__":
    main()
