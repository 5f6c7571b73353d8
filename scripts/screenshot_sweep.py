"""Make the README's Sweep screenshot: the bundled samples × 2 SoCs, partition + classify + profile
cells measured on the HTP simulator, opened on the Sweep page.

    .venv/bin/python scripts/screenshot_sweep.py [WORK_DIR] [OUT.png]

Runs the sweep into ``WORK_DIR/zoo.results`` first (resumed if it is there: a second call only
takes the picture), then opens it in headless Chromium with ``WORK_DIR`` as the operator's sweep root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e_helpers import choose_option, open_page, running_app, launch_chromium, wait_for_idle  # noqa: E402

SPEC = """models = ["samples/*.onnx"]
socs = ["sm8650", "sc8380xp"]
analyses = ["classify", "partition", "profile"]

[profile]
runs = 3
"""


def main() -> None:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="sweep-shot-")).resolve()
    out = sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "docs" / "sweep.png")
    work.mkdir(parents=True, exist_ok=True)
    samples = work / "samples"
    if not samples.exists():
        samples.symlink_to(ROOT / "samples")  # the models are named samples/<file>, as in the repository
    (work / "zoo.toml").write_text(SPEC, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "dashboard", "sweep", str(work / "zoo.toml"), "--out",
                    str(work / "zoo.results"), "--jobs", "1"], cwd=ROOT, check=True)
    from playwright.sync_api import sync_playwright

    with running_app(env={"QNN_LAB_SWEEP_ROOTS": str(work)}) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 2000, "height": 1150})
            app.open(page)
            wait_for_idle(page)
            open_page(page, "Sweep")
            choose_option(page, "Results folder", f"{work} › zoo.results")
            time.sleep(2)  # the data grid draws on a canvas after the page is idle
            page.screenshot(path=out, clip={"x": 0, "y": 0, "width": 2000, "height": 990})  # no blank foot
        finally:
            browser.close()
    print(out)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    main()
