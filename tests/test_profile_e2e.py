"""End to end: a profile run from the Profile page, drawn as the cost overlay of the Partitions
page's graph in headless Chromium, and a picked node's cost in the node panel.

A user opens a small model whose Erf and Mod the HTP refuses (they fall back to the CPU EP),
profiles it on the HTP simulator from the Profile page, opens the Partitions page's graph coloured
by cost: HTP nodes are drawn on the HTP's blue gradient and the CPU-fallback nodes on the CPU's
red one, each shade the node's share of its backend's total. Picking the Erf node (Alt+click on a
search result) shows its cost in µs in the viewer's side panel and in the page's node panel.
"""

from __future__ import annotations

import os
import re
import shutil

import partition_models as pm
import pytest
from e2e_helpers import app_in_browser, choose_option, open_page, wait_for_idle
from test_viewer_e2e import FRAME, VIEWER_TIMEOUT_MS, colour_pixels, drawn

from dashboard.render.model_explorer import COST_GRADIENTS, COST_OVERLAY, _mix

pytestmark = pytest.mark.timeout(600)

VIEWPORT = {"width": 1600, "height": 1100}
RUN_TIMEOUT = 300


def gradient_pixels(shot: bytes, backend: str) -> int:
    """Pixels coloured on ``backend``'s gradient past its first tenth (the colour is a node's share
    of its backend's total, so the costliest node's exact shade depends on the run)."""
    low, high = COST_GRADIENTS[backend]
    return sum(colour_pixels(shot, _mix(low, high, k / 20)) for k in range(2, 21))


def test_the_cost_overlay_draws_and_the_node_panel_shows_the_cost(tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with app_in_browser("--model", str(model), viewport=VIEWPORT, env=env) as (_, page):
        open_page(page, "Profile")
        page.get_by_role("button", name="Profile").click()
        page.get_by_text("Profiled in").first.wait_for(timeout=RUN_TIMEOUT * 1000)
        wait_for_idle(page)
        page.get_by_text("Top nodes · simulated HTP cycles").first.wait_for(timeout=60_000)
        assert not page.locator('[data-testid="stException"]').count()
        shot = os.environ.get("QNN_LAB_PROFILE_SCREENSHOT")  # a copy of this test's picture (the README's is scripts/screenshot_profile.py)
        page.screenshot(path=str(tmp_path / "profile_page.png"), full_page=False)
        if shot:
            shutil.copy(tmp_path / "profile_page.png", shot)

        open_page(page, "Partitions", timeout=RUN_TIMEOUT)
        page.get_by_text("keep the model off the NPU").first.wait_for(timeout=RUN_TIMEOUT * 1000)
        page.get_by_role("tab", name="Graph").click()
        wait_for_idle(page)
        choose_option(page, "Colour the graph by", COST_OVERLAY)
        frame_element = page.locator(FRAME)
        viewer = page.frame_locator(FRAME)
        search = viewer.get_by_placeholder("Search nodes/layers by regex")
        search.wait_for(timeout=VIEWER_TIMEOUT_MS)
        viewer.get_by_text(COST_OVERLAY, exact=True).first.wait_for(timeout=VIEWER_TIMEOUT_MS)
        shot = drawn(frame_element, COST_GRADIENTS["htp"][0])  # the lightest blue: the graph is coloured
        assert gradient_pixels(shot, "htp") > 200, "no HTP node is drawn on the HTP's gradient"
        assert gradient_pixels(shot, "cpu") > 200, "no CPU-fallback node is drawn on the CPU's gradient"

        search.fill("Erf")
        viewer.get_by_text("Erf", exact=True).first.click(modifiers=["Alt"])  # locate (centred) and select
        panel = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="Cost on CPU")
        panel.first.wait_for(timeout=60_000)
        assert "µs" in panel.first.inner_text()
        # the viewer's own side panel: a click on the node, now in the middle of the graph pane
        search.fill("")
        page.wait_for_timeout(1500)
        pane = viewer.locator("canvas").first.bounding_box()
        page.mouse.click(pane["x"] + pane["width"] / 2, pane["y"] + pane["height"] / 2)
        viewer.get_by_text("CPU cost (measured)").first.wait_for(timeout=VIEWER_TIMEOUT_MS)
        info = viewer.locator("body").inner_text()
        assert re.search(r"CPU cost \(measured\)\s+[\d,.]+ µs on .+ of CPU\)", info), info[-2000:]
        assert not page.locator('[data-testid="stException"]').count()
        page.screenshot(path=str(tmp_path / "cost_overlay.png"))
