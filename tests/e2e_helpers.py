"""Run the real dashboard and drive it in Debian's Chromium, for every end-to-end test.

    from e2e_helpers import launch_chromium, open_page, require_chromium, running_app, wait_for_idle

    def test_something(tmp_path):
        require_chromium()
        with running_app("--model", "samples/cnn_classifier.onnx") as app, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            app.open(page)  # signs in with the app's token, as the printed URL does
            wait_for_idle(page)
            open_page(page, "Classifier")

``running_app`` starts ``python -m streamlit run app.py`` as a subprocess on a free port in the
project directory (so ``.streamlit/config.toml`` applies) with a token of the test's own
(``QNN_LAB_TOKEN``: the dashboard answers nothing without it), waits for its health endpoint, and
stops it afterwards; ``app.open(page, path)`` signs a browser page in with it; its log is in ``app.log_text()`` for assertion messages. The browser is the
system's ``/usr/bin/chromium`` driven through Playwright's client (no browser download).
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
START_TIMEOUT = 90.0
IDLE_TIMEOUT = 60.0


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RunningApp:
    """A dashboard subprocess."""

    process: subprocess.Popen
    port: int
    log_path: Path
    token: str

    @property
    def url(self) -> str:
        """The plain loopback URL: with the token it leads a browser to ``session_url``."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def session_host(self) -> str:
        """This start's own host name, ``qnn-<port>-<random>.localhost``, from the URL it printed
        (Chromium resolves it to loopback; Python's resolver does not, so requests from a test go
        to 127.0.0.1 with it as their ``Host``)."""
        found = re.search(r"open http://(qnn-\d+-[0-9a-f]+\.localhost):\d+/", self.log_text())
        assert found, f"the dashboard printed no URL under its own host name:\n{self.log_text()}"
        return found.group(1)

    @property
    def session_url(self) -> str:
        return f"http://{self.session_host}:{self.port}/"

    def signed_in_url(self, path: str = "") -> str:
        """``path`` of the app with the token: the gate sets its session cookie and redirects."""
        return f"{self.url}{path}?token={self.token}"

    def open(self, page, path: str = "") -> None:
        """Open ``path`` in a browser ``page``, signed in."""
        page.goto(self.signed_in_url(path))

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen, grace: float = 10) -> None:
    """Terminate ``process`` (by its own id), killing it if it has not ended after ``grace`` s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def start_app(*script_args: str, port: int | None = None, env: dict[str, str] | None = None,
              timeout: float = START_TIMEOUT) -> RunningApp:
    """Start ``streamlit run app.py -- *script_args`` and wait until it answers its health check."""
    port = port or free_port()
    env = {**(env or {})}
    token = env.setdefault("QNN_LAB_TOKEN", secrets.token_urlsafe(24))
    log_path = Path(tempfile.mkstemp(prefix=f"streamlit-{port}-", suffix=".log")[1])
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
               "--server.port", str(port), "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
               "--", *script_args]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, **env})
    app = RunningApp(process, port, log_path, token)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}:\n{app.log_text()}")
        try:
            with urllib.request.urlopen(f"{app.url}_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return app
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    app.stop()
    raise RuntimeError(f"streamlit did not become healthy in {timeout:.0f}s:\n{app.log_text()}")


@contextmanager
def running_app(*script_args: str, **kwargs) -> Iterator[RunningApp]:
    """``start_app`` as a context manager that always stops the subprocess."""
    app = start_app(*script_args, **kwargs)
    try:
        yield app
    finally:
        app.stop()


def require_chromium() -> None:
    """Skip when Chromium is absent and cannot be installed here (not root); as root it must be
    there (``make test`` installs it), so its absence fails the test instead of hiding it."""
    if Path(CHROMIUM).exists():
        return
    if os.geteuid() == 0:
        pytest.fail(f"{CHROMIUM} is missing; run `make system-deps` (scripts/install_system_deps.sh)")
    pytest.skip(f"{CHROMIUM} is not installed and installing it needs root")


def launch_chromium(playwright, extra_args: list[str] = (), **kwargs):
    """Launch the system Chromium headless with the flags that keep it off the network."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args], headless=True,
                                      **kwargs)


@contextmanager
def app_in_browser(*script_args: str, viewport: dict[str, int], env: dict[str, str] | None = None) -> Iterator:
    """``(app, page)``: the app started on ``script_args``, opened in headless Chromium and drawn;
    the browser and the app are stopped when the block ends."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with running_app(*script_args, env=env) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport=viewport)
            app.open(page)
            wait_for_idle(page)
            yield app, page
        finally:
            browser.close()


def open_partition_graph(page, timeout: float) -> None:
    """Open the Partitions page, wait ``timeout`` seconds at most for its analysis (it runs in the
    worker meanwhile), then open its Graph tab."""
    open_page(page, "Partitions", timeout=timeout)
    page.get_by_text("keep the model off the NPU").first.wait_for(timeout=timeout * 1000)
    page.get_by_role("tab", name="Graph").click()
    wait_for_idle(page)


def wait_for_idle(page, timeout: float = IDLE_TIMEOUT) -> None:
    """Wait until the app has drawn and settled: no script run in progress (Streamlit shows its
    status widget meanwhile), no stale (dimmed) elements, and no skeletons of element types whose
    code is still loading."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout * 1000)
    page.wait_for_selector('[data-testid="stSidebar"]', timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        busy = page.locator('[data-testid="stStatusWidget"], [data-testid="stSkeleton"], '
                            '[data-stale="true"]').count() > 0
        quiet = 0 if busy else quiet + 1
        if quiet >= 4:
            return
        page.wait_for_timeout(250)
    raise TimeoutError(f"the app was still running after {timeout:.0f}s")


def open_page(page, title: str, timeout: float = IDLE_TIMEOUT) -> None:
    """Click a page in the sidebar navigation and wait for it to finish drawing."""
    links = page.locator('[data-testid="stSidebar"] [data-testid="stPageLink-NavLink"]')
    links.filter(has_text=re.compile(rf"{re.escape(title)}$")).click()  # after the icon's ligature text
    wait_for_idle(page, timeout)


def choose_option(page, label: str, option: str, timeout: float = IDLE_TIMEOUT) -> None:
    """Pick ``option`` in the ``st.selectbox`` labelled ``label``."""
    page.get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_idle(page, timeout)
