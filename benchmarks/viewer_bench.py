"""Benchmark the Model Explorer graph viewer on generated decoders of 400, 5,000 and 20,000 nodes.

    .venv/bin/python benchmarks/viewer_bench.py [--nodes 400,5000,20000]

For each size, in this run: the server side (weight-free read, graph JSON built, its size) and the
time to the first drawn graph in headless Chromium: the real app (``streamlit run``) on the model's
Overview page, from the click that switches its viewer to Model Explorer until the viewer's canvas
shows the graph (the JSON crosses the websocket, Model Explorer lays out the name scopes in its web
worker and draws). Ratios are against the smallest size measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

FRAME = 'iframe[title*="model_explorer"]'
DRAW_TIMEOUT_S = 300
DRAWN_PIXELS = 500  # dark-enough pixels on the canvas once group boxes, edges and labels are drawn


def server_side(path: Path) -> tuple[float, int]:
    """Seconds to read the model weight-free and build the viewer's graph JSON, and its size."""
    from dashboard.intake.reader import load_model
    from dashboard.render.model_explorer import build_graph

    start = time.perf_counter()
    text = build_graph(load_model(str(path)), path.name).to_json()
    return time.perf_counter() - start, len(text)


def drawn_pixels(canvas) -> int:
    import io

    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(canvas.screenshot())).convert("L"))
    return int((pixels < 200).sum())


def first_draw(path: Path) -> float:
    """Seconds from switching the Overview's viewer to Model Explorer to the first drawn graph."""
    from e2e_helpers import launch_chromium, running_app, wait_for_idle
    from playwright.sync_api import sync_playwright

    with running_app("--model", str(path), timeout=300) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1100})
            app.open(page)
            wait_for_idle(page, timeout=300)
            button = page.locator('[data-testid="stButtonGroup"]').get_by_text("Model Explorer", exact=True)
            start = time.perf_counter()
            button.click()
            canvas = page.frame_locator(FRAME).locator("canvas").first
            canvas.wait_for(timeout=DRAW_TIMEOUT_S * 1000)
            while drawn_pixels(canvas) < DRAWN_PIXELS:
                if time.perf_counter() - start > DRAW_TIMEOUT_S:
                    raise TimeoutError(f"no graph drawn in {DRAW_TIMEOUT_S} s")
                page.wait_for_timeout(100)
            return time.perf_counter() - start
        finally:
            browser.close()


def main() -> None:
    import onnx

    from dashboard.intake.samples import build_decoder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="400,5000,20000", help="comma list of graph sizes")
    sizes = [int(n) for n in parser.parse_args().nodes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="viewer-bench-") as folder:
        for size in sizes:
            path = Path(folder) / f"decoder_{size}.onnx"
            onnx.save(build_decoder(size), path)
            nodes = len(onnx.load(path, load_external_data=False).graph.node)
            build_s, json_bytes = server_side(path)
            rows.append((size, nodes, build_s, json_bytes, first_draw(path)))
    base = rows[0][4]
    print("Model Explorer viewer: time to the first drawn graph (headless Chromium, Overview page)")
    print(f"{'target':>8} {'nodes':>7} {'JSON built':>11} {'JSON':>9} {'first draw':>11} {'vs smallest':>12}")
    for size, nodes, build_s, json_bytes, draw_s in rows:
        print(f"{size:>8,} {nodes:>7,} {build_s:>10.2f}s {json_bytes / 1e6:>7.1f}MB {draw_s:>10.2f}s {draw_s / base:>11.1f}x")


if __name__ == "__main__":
    main()
