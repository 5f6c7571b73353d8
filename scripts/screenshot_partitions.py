"""Make the README's Partitions screenshot: the bundled LLM decoder on the HTP simulator, its graph
in Model Explorer coloured by class.

    .venv/bin/python scripts/screenshot_partitions.py [MODEL] [OUT.png]

The other README screenshots come from the end-to-end tests (``UPDATE_SCREENSHOTS=1 make test``);
this one needs a real model whose analysis has something to show, which a test model does not.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e_helpers import app_in_browser, open_partition_graph  # noqa: E402

ANALYSIS_TIMEOUT_S = 300


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "samples" / "llm_decoder_kv.onnx")
    out = sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "docs" / "partitions.png")
    with app_in_browser("--model", model, viewport={"width": 1600, "height": 2300}) as (_, page):
        open_partition_graph(page, timeout=ANALYSIS_TIMEOUT_S)
        viewer = page.frame_locator('iframe[title*="model_explorer"]')
        viewer.get_by_text("class", exact=True).first.wait_for(timeout=120_000)  # the overlays are loaded
        time.sleep(3)  # Model Explorer lays out and draws in its worker after the page is idle
        page.screenshot(path=out)
    print(out)


if __name__ == "__main__":
    main()
