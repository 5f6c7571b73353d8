"""Make the accuracy manual's layer chart: a real model, PP-OCR's text-direction classifier
(``ch_ppocr_mobile_v2.0_cls_infer.onnx`` from the ``rapidocr-onnxruntime`` 1.4.4 wheel, Apache-2.0,
sha256-checked as ``fetch_zoo_models.py`` checks it), in fp16 on the HTP simulator against the CPU
EP's fp32, layer by layer (cumulative and layerwise), on the bundled photos with PP-OCR's
preprocessing at the model's 48x192 line.

    .venv/bin/python scripts/screenshot_accuracy.py [OUT.png]

The chart is the page's own figure (``render.accuracy_figures.layer_chart``) written as a
self-contained HTML file (plotly's script inline: no outside request) and photographed in headless
Chromium. The wheel is downloaded with ``pip download --no-deps`` into a temporary folder.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fetch_zoo_models import SOURCES, _fetch  # noqa: E402
from tests.e2e_helpers import launch_chromium, require_chromium  # noqa: E402

MODEL = "rapidocr_ppocr_mobile_cls.onnx"
VIEWPORT = {"width": 1400, "height": 760}


def main() -> None:
    from dashboard.accuracy.preprocess import preprocess_given
    from dashboard.accuracy.run import accuracy_model
    from dashboard.render.accuracy_figures import layer_chart
    from dashboard.runtime.knobs import Settings

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "accuracy.png")
    require_chromium()
    source = next(s for s in SOURCES if s.dest == MODEL)
    with tempfile.TemporaryDirectory(prefix="accuracy-shot-") as folder:
        model = Path(folder) / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
        model.write_bytes(_fetch(source, Path(folder)))
        settings = Settings(soc="sm8650", fp16=True, shapes={"x": (1, 3, 48, 192)})
        preprocess = preprocess_given(model, "ocr", {"resize": (48, 192)})
        report = accuracy_model(model, ROOT / "samples" / "data" / "images", settings,
                                layers=["cumulative", "layerwise"], preprocess=preprocess, limit=8)
        figure = layer_chart(report)
        figure.update_layout(width=VIEWPORT["width"] - 40, height=VIEWPORT["height"] - 40)
        html = Path(folder) / "chart.html"
        figure.write_html(html, include_plotlyjs=True, full_html=True)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.goto(html.as_uri())
                page.wait_for_selector(".main-svg", timeout=60_000)
                page.screenshot(path=str(out))
            finally:
                browser.close()
    print(f"wrote {out}: {report.verdicts[0] if report.verdicts else ''}")


if __name__ == "__main__":
    main()
