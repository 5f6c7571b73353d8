"""No runtime worker and no scratch folder outlives its job: the CLI interrupted, terminated or
killed mid-run, and a browser session closed while the dashboard waits on a long compile.

Workers are found the way an operator would find an orphan: every process of this user whose
environment carries the test's own marker (inherited from the command the test started).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import onnx
import pytest
from deadlines import DEADLINE
from fake_workers import alive, interruptible, processes_with_env

from dashboard.intake.samples import build_cnn_classifier, build_decoder

ROOT = Path(__file__).resolve().parent.parent
MARK = "QNN_LAB_TEST_MARK"

pytestmark = pytest.mark.timeout(300)


def wait_for(condition, seconds: float, step: float = 0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return condition()


def leftovers(folder: Path, pattern: str) -> list[str]:
    """What matches ``pattern`` in ``folder``, each with whether the pid in its name still runs
    and what is inside it: what a failure must say to be diagnosed."""
    out = []
    for path in sorted(folder.glob(pattern)):
        pid = next((int(part) for part in path.name.split("-") if part.isdigit()), None)
        inside = sorted(str(p.relative_to(path)) for p in path.rglob("*"))[:20] if path.is_dir() else "a file"
        out.append(f"{path.name} (pid {pid} {'alive' if pid and alive(pid) else 'gone'}; {inside})")
    return out


def marked_env(tmp_path: Path) -> tuple[str, dict[str, str]]:
    mark = uuid.uuid4().hex
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    return mark, {**os.environ, MARK: mark, "TMPDIR": str(scratch), "QNN_LAB_CACHE": str(tmp_path / "cache"),
                  "QNN_LAB_MODEL_STORE": str(tmp_path / "models"), "QNN_LAB_CONTEXT_STORE": str(tmp_path / "contexts")}


@pytest.mark.parametrize("how, exit_code, last_line", [
    (signal.SIGTERM, 143, "error: terminated by SIGTERM"),
    (signal.SIGHUP, 129, "error: terminated by SIGHUP"),
    (signal.SIGINT, 130, "error: interrupted"),
    (signal.SIGKILL, -9, None),  # no handler runs: the worker notices its stdin close by itself
])
def test_no_orphan_left_after_a_signal_to_the_cli_during_a_timeline(tmp_path, how, exit_code, last_line):
    model = tmp_path / "cnn.onnx"
    onnx.save(build_cnn_classifier(size=32, seed=7), model)
    mark, env = marked_env(tmp_path)
    cli = subprocess.Popen([sys.executable, "-m", "dashboard", "timeline", str(model), "--requests", "100000",
                            "--rate", "50", "--strategies", "fast"],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=interruptible)
    try:
        # Mid-run: the worker exists and its timeline request has made its scratch folder.
        workers = wait_for(lambda: [p for p in processes_with_env(MARK, mark) if p != cli.pid], 60)
        assert workers, "the CLI started no worker"
        assert wait_for(lambda: list((tmp_path / "tmp").glob("qnn-lab-timeline-*")), 60)
        cli.send_signal(how)
        _, stderr = cli.communicate(timeout=DEADLINE)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == exit_code
    if last_line is not None:
        assert stderr.strip().splitlines()[-1] == last_line and "Traceback" not in stderr
    assert wait_for(lambda: not any(alive(pid) for pid in workers), DEADLINE), "the worker outlived the CLI"
    # (the runtime's own libraries keep a file of theirs there; the project's folders are qnn-lab-*)
    assert wait_for(lambda: not list((tmp_path / "tmp").glob("qnn-lab-*")), DEADLINE), \
        f"a scratch folder outlived its job: {leftovers(tmp_path / 'tmp', 'qnn-lab-*')}"


@contextlib.contextmanager
def compiling_session(tmp_path: Path):
    """``(app, browser, workers)``: the dashboard serving a 4,000-node decoder (the HTP compile
    alone takes well over half a minute here, without a progress event in between), its
    Partitions page open in Chromium and its worker compiling; all stopped when the block ends."""
    from e2e_helpers import launch_chromium, require_chromium, running_app
    from playwright.sync_api import sync_playwright

    require_chromium()
    model = tmp_path / "decoder_4k.onnx"
    onnx.save(build_decoder(4000), model)
    mark, env = marked_env(tmp_path)
    with running_app("--model", str(model), env={k: env[k] for k in (MARK, "TMPDIR", "QNN_LAB_CACHE")}) as app, \
            sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page()
            app.open(page, "partitions")
            page.get_by_text("creating the HTP session").first.wait_for(timeout=120_000)
            workers = [p for p in processes_with_env(MARK, mark) if p != app.process.pid]
            assert workers, "the page started no worker"
            yield app, browser, workers
        finally:
            browser.close()


def test_closing_the_browser_stops_the_session_s_worker_mid_compile(tmp_path):
    """The tab is closed while QNN compiles: the session's worker is stopped then, not when the
    compile would have ended (no analysis was finished and cached), and the dashboard keeps serving."""
    with compiling_session(tmp_path) as (app, browser, workers):
        closed = time.monotonic()
        browser.close()  # the page shows the HTP session being created: QNN is compiling
        assert wait_for(lambda: not any(alive(pid) for pid in workers), DEADLINE), "the worker outlived the session"
        stopped_after = time.monotonic() - closed
        with urllib.request.urlopen(f"{app.url}_stcore/health", timeout=10) as response:
            assert response.read().strip() == b"ok"
    assert wait_for(lambda: not list((tmp_path / "tmp").glob("qbl-partition-*")), DEADLINE), \
        f"a scratch folder outlived its worker: {leftovers(tmp_path / 'tmp', 'qbl-partition-*')}"
    finished = [p for p in (tmp_path / "cache" / "partitions").glob("*.json")
                if p.name not in ("digests.json", "gpu_probe.json")]  # a report is cached once it is done
    assert not finished, "the compile ended before the worker was stopped"
    print(f"worker stopped {stopped_after:.1f} s after the browser closed")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_server_stops_its_sessions_workers(tmp_path, how):
    """SIGTERM or SIGHUP (its terminal closed) to the web server while a session's worker compiles:
    the worker must not outlive the server, whatever path the server's end takes (a graceful
    shutdown that releases the sessions, or the worker noticing its pipe close)."""
    with compiling_session(tmp_path) as (app, _browser, workers):
        app.process.send_signal(how)
        app.process.wait(timeout=DEADLINE)
    assert wait_for(lambda: not any(alive(pid) for pid in workers), DEADLINE), "a worker outlived the server"
