"""End to end: a node picked in the Partitions page's graph reruns only the viewer and the node
details, in headless Chromium on the real app.

Why this and not a timing: picking a node on a few-hundred-node graph took 6 to 25 s to reach the
details, though the server's rerun takes well under a second (the analysis comes from the
session, the graph JSON from its cache). The browser was redrawing the whole page (every table,
chart and form) for each pick. The viewer and the details are now one fragment: the browser
asks for a rerun of that fragment only, which is what this test reads off the websocket.
"""

from __future__ import annotations

import onnx
import pytest
from e2e_helpers import app_in_browser, open_page, wait_for_idle

from dashboard.intake.samples import build_decoder

pytestmark = pytest.mark.timeout(420)

FRAME = 'iframe[title*="model_explorer"]'
ANALYSIS_TIMEOUT = 300


def reruns(frames: list[bytes]) -> list:
    """The rerun requests among the browser's websocket messages (``BackMsg.rerun_script``)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    out = []
    for frame in frames:
        if isinstance(frame, str):
            continue
        message = BackMsg.FromString(frame)
        if message.WhichOneof("type") == "rerun_script":
            out.append(message.rerun_script)
    return out


def test_a_pick_reruns_only_the_viewer_and_the_node_details(tmp_path):
    model = tmp_path / "decoder.onnx"
    onnx.save(build_decoder(400), model)
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with app_in_browser("--model", str(model), viewport={"width": 1600, "height": 1100}, env=env) as (_, page):
        sent: list[bytes] = []
        page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(frame)))
        page.reload()  # a new session, whose websocket is watched from its start
        wait_for_idle(page)
        open_page(page, "Partitions", timeout=ANALYSIS_TIMEOUT)
        page.get_by_text("keep the model off the NPU").first.wait_for(timeout=ANALYSIS_TIMEOUT * 1000)
        page.get_by_role("tab", name="Graph").click()
        viewer = page.frame_locator(FRAME)
        search = viewer.get_by_placeholder("Search nodes/layers by regex")
        search.wait_for(timeout=120_000)
        wait_for_idle(page)
        before = len(sent)
        search.fill("Softmax")
        viewer.get_by_text("Softmax", exact=True).first.click(modifiers=["Alt"])  # the first search result
        details = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="op Softmax")
        details.first.wait_for(timeout=120_000)
        wait_for_idle(page)
        asked = reruns(sent[before:])
        assert asked, "the pick asked for no rerun"
        assert all(r.fragment_id for r in asked), "a pick reran the whole page"
        # the page's own picker is in the same fragment
        before = len(sent)
        page.get_by_role("combobox", name="Node (or click one in the graph)", exact=True).click()
        page.keyboard.type("h.1/attn/Softmax")  # the list shows a few of its 400 options at a time
        page.get_by_role("option", name="/transformer/h.1/attn/Softmax", exact=True).click()
        page.locator('[data-testid="stMarkdownContainer"]').filter(
            has_text="/transformer/h.1/attn/Softmax").first.wait_for(timeout=120_000)
        wait_for_idle(page)
        asked = reruns(sent[before:])
        assert asked and all(r.fragment_id for r in asked)
        assert not page.locator('[data-testid="stException"]').count()
