"""End to end: the Model Explorer graph on the Partitions page of the real app, in headless Chromium.

A user opens a few-hundred-node decoder, lets the HTP simulator analyse it, opens the Graph tab,
sees the graph drawn by name scope with the class overlay's colours, finds a node with the
viewer's search and picks it (Alt+click, Model Explorer's "locate and select"); the page's node
details below then show that node.
"""

from __future__ import annotations

import re
import time

import onnx
import pytest
from e2e_helpers import app_in_browser, open_page, wait_for_idle

from dashboard.intake.samples import build_decoder
from dashboard.render.partition_graph import CLASS_COLORS

pytestmark = pytest.mark.timeout(420)

VIEWPORT = {"width": 1600, "height": 1100}
ANALYSIS_TIMEOUT = 300
VIEWER_TIMEOUT_MS = 120_000
FRAME = 'iframe[title*="model_explorer"]'


def colour_pixels(png: bytes, hex_colour: str, tolerance: int = 12) -> int:
    """How many pixels of a screenshot are within ``tolerance`` of ``hex_colour`` on every channel."""
    import io

    import numpy as np
    from PIL import Image

    target = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return int((np.abs(pixels - target) <= tolerance).all(axis=-1).sum())


def drawn(frame_element, colour: str, seconds: float = 60.0) -> bytes:
    """A screenshot of the viewer once ``colour`` shows in it (the viewer lays out and draws in a
    worker, later on a loaded machine), or the last one taken when it never does."""
    deadline = time.monotonic() + seconds
    while True:
        shot = frame_element.screenshot()
        if colour_pixels(shot, colour) > 200 or time.monotonic() > deadline:
            return shot
        time.sleep(1)


def overlay_shown(viewer, name: str) -> bool:
    """Whether Model Explorer's node data panel marks the overlay ``name`` as the one drawn."""
    row = viewer.locator(".index-row").filter(has=viewer.get_by_text(name, exact=True))
    return "selected" in (row.locator(".visibility").first.get_attribute("class") or "")


def test_partition_graph_draws_overlays_and_a_pick_shows_the_node(tmp_path):
    model = tmp_path / "decoder.onnx"
    onnx.save(build_decoder(400), model)
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with app_in_browser("--model", str(model), viewport=VIEWPORT, env=env) as (_, page):
        # Streamlit draws every tab at once: the viewer starts in the Graph tab while it is hidden,
        # and must draw the graph once the tab is opened
        open_page(page, "Partitions", timeout=ANALYSIS_TIMEOUT)
        page.get_by_text("keep the model off the NPU").first.wait_for(timeout=ANALYSIS_TIMEOUT * 1000)
        frame_element = page.locator(FRAME)
        frame_element.wait_for(state="attached")
        page.wait_for_timeout(5000)
        page.get_by_role("tab", name="Graph").click()
        viewer = page.frame_locator(FRAME)
        search = viewer.get_by_placeholder("Search nodes/layers by regex")
        search.wait_for(timeout=VIEWER_TIMEOUT_MS)
        # every overlay is listed, the class overlay is the one drawn
        for overlay in ("class", "HTP (measured)", "GPU (predicted)", "intersection plan", "segmented plan"):
            viewer.get_by_text(overlay, exact=True).first.wait_for(timeout=VIEWER_TIMEOUT_MS)
        viewer.get_by_text("transformer", exact=True).first.wait_for(timeout=VIEWER_TIMEOUT_MS)
        shot = drawn(frame_element, CLASS_COLORS["both"])  # the WebGL scene settles after its first frames
        assert colour_pixels(shot, CLASS_COLORS["both"]) > 200, "no node drawn in the 'both' colour"
        assert colour_pixels(shot, CLASS_COLORS["removed"]) > 20, "no node drawn in the 'removed' colour"
        # hidden and shown again, the graph is still drawn
        page.get_by_role("tab", name="Plans").click()
        page.wait_for_timeout(1000)
        page.get_by_role("tab", name="Graph").click()
        shot = drawn(frame_element, CLASS_COLORS["both"])
        assert colour_pixels(shot, CLASS_COLORS["both"]) > 200, "the graph is gone after the tab was hidden"
        # the class overlay stays the one shown until the user picks another, which then stays
        assert overlay_shown(viewer, "class")
        viewer.locator(".index-row").filter(has_text="intersection plan").locator(".visibility").click()
        page.wait_for_timeout(2000)
        assert overlay_shown(viewer, "intersection plan") and not overlay_shown(viewer, "class")
        # find a node and pick it: the page's node details follow
        search.fill("Softmax")
        viewer.get_by_text("Softmax", exact=True).first.click(modifiers=["Alt"])
        node = "/transformer/h.0/attn/Softmax"
        details = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="op Softmax")
        details.first.wait_for(timeout=60_000)
        assert node in details.first.inner_text()
        wait_for_idle(page)
        picker = page.locator('[data-testid="stSelectbox"]').filter(has_text="Node (or click one in the graph)")
        assert picker.locator("input").input_value() == node
        assert not page.locator('[data-testid="stException"]').count()
        page.screenshot(path=str(tmp_path / "partition_graph.png"))


def test_hostile_names_show_as_text_in_the_viewer(hostile_layernorm_model):
    """Node and input names holding HTML and script are drawn and listed as text: nothing runs."""
    with app_in_browser("--model", str(hostile_layernorm_model), viewport=VIEWPORT) as (_, page):
        page.locator('[data-testid="stButtonGroup"]').get_by_text("Model Explorer", exact=True).click()
        wait_for_idle(page)
        viewer = page.frame_locator(FRAME)
        search = viewer.get_by_placeholder("Search nodes/layers by regex")
        search.wait_for(timeout=VIEWER_TIMEOUT_MS)
        search.fill("LayerNormalization")  # the results list shows the hostile name scopes as DOM text
        viewer.get_by_text(re.compile(r"^\s*\d+ results?\s*$")).first.wait_for(timeout=VIEWER_TIMEOUT_MS)
        page.wait_for_timeout(1500)
        frame = next(f for f in page.frames if "model_explorer_app" in f.url)
        assert frame.evaluate("window.__pwned") is None and page.evaluate("window.__pwned") is None
        assert frame.locator('img[src="x"], script:not([src])').count() == 0
