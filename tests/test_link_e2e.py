"""End to end: the address bar carries the model, its settings and reopens them, in headless
Chromium on the real app. A value set on the Timeline page shows in the URL, stays there when the
user moves to another page (each page writes it again), and the URL opened in another browser
(signed in) shows the same model with the same value."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import numpy as np
import onnx
import pytest
from e2e_helpers import app_in_browser, open_page, wait_for_idle
from onnx import TensorProto, helper, numpy_helper

pytestmark = pytest.mark.timeout(300)


def image_model(path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0", pads=[1, 1, 1, 1])],
                              "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)


def query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_a_setting_is_in_the_url_across_pages_and_a_new_tab_reopens_it(tmp_path):
    model = tmp_path / "detector.onnx"
    image_model(model)
    env = {"QNN_LAB_CACHE": str(tmp_path / "cache")}
    with app_in_browser("--model", str(model), viewport={"width": 1400, "height": 1000}, env=env) as (app, page):
        open_page(page, "Timeline")
        page.get_by_text("Session options, policy, shared memory, tolerance").click()
        field = page.get_by_label("height", exact=True)
        field.fill("320")
        field.press("Enter")
        wait_for_idle(page)
        assert query(page).get("dim.height") == "320", page.url
        assert query(page).get("model") == str(model)
        open_page(page, "Devices")
        assert query(page).get("dim.height") == "320", page.url  # the Devices page says it too
        link = page.url.replace("/devices", "/timeline")
        tab = page.context.browser.new_page()  # another browser, signed in, then given the link
        app.open(tab)
        wait_for_idle(tab)
        tab.goto(link)
        wait_for_idle(tab)
        tab.get_by_text("Session options, policy, shared memory, tolerance").click()
        assert tab.get_by_label("height", exact=True).input_value() == "320"
        assert re.search(r"detector\.onnx", tab.locator('[data-testid="stSidebar"]').inner_text())
        assert not tab.locator('[data-testid="stException"]').count()
