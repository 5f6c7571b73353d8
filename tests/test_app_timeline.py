"""The Devices and Timeline pages under AppTest (real worker, real HTP simulator), and the
Timeline page end to end in Chromium."""

from __future__ import annotations

import json
import os

import platform
import socket
from pathlib import Path

import onnx
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.intake.samples import build_cnn_classifier, sample_path
from dashboard.runtime.devices import Device
from dashboard.views.state import SelectedModel

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT = 300.0
JOB = "timeline_job"  # the page's background run (dashboard.views.jobs)
SCREENSHOT_SAMPLE = "cnn_classifier.onnx"  # the README's timeline: a bundled sample, as a new user opens it


@pytest.fixture()
def stores(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(tmp_path / "models"))
    monkeypatch.setenv("QNN_LAB_CONTEXT_STORE", str(tmp_path / "contexts"))


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> SelectedModel:
    path = tmp_path_factory.mktemp("app") / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), path)
    return SelectedModel(str(path), "cnn32", file_digest(path), "path")


def page(name: str, model: SelectedModel | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).switch_page(f"pages/{name}.py")
    if model is not None:  # as if the user had picked it: the startup default is not applied
        at.session_state["selected_model"] = model
        at.session_state["intake_started"] = True
    return at


def workload_key(model: SelectedModel, device: Device) -> str:
    """The workload widgets' key suffix: per model and the kind of hardware of the device."""
    from dashboard.timeline.remote import target_hardware

    return f"{model.digest}_{target_hardware(device)}"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements).replace("\\", "")


def test_timeline_page_needs_a_model():
    """A session in which nothing could be selected at startup (no readable sample) is told where
    to pick a model."""
    at = page("timeline")
    at.session_state["intake_started"] = True
    at.run()
    assert not at.exception
    assert "No model selected" in texts(at.info)


def test_timeline_run_then_a_failing_run_keeps_the_first(stores, small_model):
    from page_jobs import settle

    at = page("timeline", small_model).run()
    assert not at.exception and not at.error
    assert "No run yet" in texts(at.info)
    digest = small_model.digest
    key = workload_key(small_model, Device.parse("local"))
    at.multiselect(key=f"tl_strategies_{key}").set_value(["fast", "migrate"])
    at.number_input(key=f"tl_requests_{key}").set_value(90)
    at.number_input(key=f"tl_rate_{key}").set_value(30.0)
    at.button(key="tl_run").click().run(timeout=RUN_TIMEOUT)
    settle(at, JOB, timeout=RUN_TIMEOUT)  # the run is the page's background job
    assert not at.exception and not at.error, texts(at.error)

    runs = at.session_state["timeline_runs"]
    assert len(runs) == 1
    data = runs[0]["data"]
    assert list(data["strategies"]) == ["fast", "migrate"]
    assert any(e["kind"] == "swap" for e in data["strategies"]["migrate"]["events"])
    table = at.dataframe[0].value
    assert list(table["strategy"]) == ["fast only", "hot migration"] and list(table["failed"]) == [0, 0]
    assert "CPU EP (no QNN GPU on this host)" in texts(at.info) + texts(at.markdown)
    assert [t.label for t in at.tabs] == ["fast only", "hot migration"]
    if data["runtime"]["hardware"] == "simulator":  # said next to the charts, and in the HTP's label
        assert "Simulator latency is not NPU latency" in texts(at.warning)
        assert "Snapdragon device" in texts(at.warning)
        assert "QNN HTP on the HTP simulator (x86_64)" in texts(at.markdown)
        # paced until after the swap (the simulator's default): the migration serves after it
        assert "request(s) served after the swap on QNN HTP (simulator)" in texts(at.success)
        assert data["workload"]["after_swap"] > 0 and data["workload"]["requests"] < 90
    assert [d.proto.label for d in at.get("download_button")] == [
        "Run (JSON)", "Requests (CSV)", "Comparison (CSV)", "Events (CSV)", "Report (HTML)"]  # the last: sidebar
    agreement = [d.value for d in at.dataframe if "relative error" in d.value.columns]  # per output, per check
    assert agreement and all(set(t["output"]) <= {o.name for o in load_model(small_model.path).outputs}
                             and t["agree"].all() for t in agreement)

    # The same page on a device that cannot be reached: one error line, the first run stays.
    unreachable = Device.parse(f"ssh://nobody@127.0.0.1:{closed_port()}", connect_timeout=5)
    at.session_state["devices"] = {"local": Device.parse("local"), unreachable.url: unreachable}
    at.run()
    at.selectbox(key="tl_device").set_value(unreachable.url).run()
    at.button(key="tl_run").click().run(timeout=RUN_TIMEOUT)
    settle(at, JOB, timeout=RUN_TIMEOUT)
    assert not at.exception
    assert "cannot reach" in texts(at.error) and "Connection refused" in texts(at.error)
    assert len(at.session_state["timeline_runs"]) == 1
    assert list(at.dataframe[0].value["strategy"]) == ["fast only", "hot migration"]


# -- the run as a background job: Cancel, another model, another page ---------------------------------


def fake_device(folder: Path, hold_after: int = -1) -> Device:
    """A device whose worker answers ``timeline`` at once without sessions (``fake_workers``),
    holding after ``hold_after`` answers until ``folder / "gate"`` exists."""
    import partition_models as pm
    from fake_workers import fake_timeline_code

    return pm.worker_device(folder, fake_timeline_code(folder / "gate", hold_after))


def on_device(at: AppTest, device: Device) -> AppTest:
    at.session_state["devices"] = {"local": Device.parse("local"), device.url: device}
    at.session_state["device_current"] = device.url
    return at


def start_run(at: AppTest, model: SelectedModel, requests: int = 4) -> AppTest:
    """Pick one strategy and ``requests`` requests for ``model`` on the page's device (a fake
    worker: a device's defaults, exactly ``requests``) and press Run (the click returns at once:
    the run is the page's job)."""
    key = workload_key(model, at.session_state["devices"][at.session_state["device_current"]])
    at.multiselect(key=f"tl_strategies_{key}").set_value(["fast"])
    at.number_input(key=f"tl_requests_{key}").set_value(requests)
    return at.button(key="tl_run").click().run(timeout=60)


def wait_for(condition, what: str):
    from deadlines import wait_until

    wait_until(condition, what, interval=0.05)


def run_selector(at: AppTest):
    return next(s for s in at.selectbox if s.label == "Run")


@pytest.fixture()
def model_pair(tmp_path) -> tuple[SelectedModel, SelectedModel]:
    models = []
    for name, seed in (("model_a", 1), ("model_b", 2)):
        path = tmp_path / f"{name}.onnx"
        onnx.save(build_cnn_classifier(size=32, seed=seed), path)
        models.append(SelectedModel(str(path), name, file_digest(path), "path"))
    return models[0], models[1]


def test_a_run_cancelled_from_the_page_stops_its_worker(stores, small_model, tmp_path):
    """The run streams its answers into the progress bar; Cancel ends the worker process and the
    page says the run was cancelled, with nothing kept."""
    from fake_workers import gone_within
    from page_jobs import settle

    at = on_device(page("timeline", small_model), fake_device(tmp_path, hold_after=2)).run()
    start_run(at, small_model)
    assert not at.exception
    job = at.session_state[JOB]
    wait_for(lambda: job.count == (2, 4) and job.cancellation.pids, "two answers streamed in")
    [pid] = job.cancellation.pids
    at.run()
    [progress] = at.get("progress")
    assert "2/4 requests answered" in progress.proto.text and "left" in progress.proto.text
    at.button(key=f"{JOB}_cancel").click().run()
    assert gone_within(pid, 30), "the worker outlived Cancel"
    settle(at, JOB)
    assert job.cancelled and any("Cancelled after" in i.value for i in at.info), texts(at.info)
    assert not at.error and not at.session_state["timeline_runs"]


def test_a_run_of_model_b_after_model_a_shows_b_s_run(stores, model_pair, tmp_path):
    """Model A run, then model B opened and run: the run selector and the charts are B's, and A's
    run is back when A is opened again."""
    from page_jobs import settle

    a, b = model_pair
    at = on_device(page("timeline", a), fake_device(tmp_path)).run()
    start_run(at, a)
    settle(at, JOB)
    assert run_selector(at).value.startswith("#1 model_a")
    at.session_state["selected_model"] = b
    at.run()
    assert "No run yet" in texts(at.info)  # A's run is not B's
    start_run(at, b, requests=3)
    settle(at, JOB)
    selector = run_selector(at)
    assert selector.value.startswith("#2 model_b") and selector.options == [selector.value]
    shown = at.session_state["timeline_runs"][-1]
    assert shown["data"]["model"] == b.path and "3 requests" in texts(at.markdown)
    assert "Done: 3/3 requests answered" in texts(at.caption)
    at.session_state["selected_model"] = a
    at.run()
    assert run_selector(at).value.startswith("#1 model_a") and "4 requests" in texts(at.markdown)


def test_leaving_the_timeline_page_and_coming_back_keeps_the_run(stores, small_model, tmp_path):
    """Start a run, open another page, come back: still running (its progress and Cancel are
    there), and once it ends its result is shown."""
    from page_jobs import settle

    at = on_device(page("timeline", small_model), fake_device(tmp_path, hold_after=1)).run()
    start_run(at, small_model)
    job = at.session_state[JOB]
    wait_for(lambda: job.count == (1, 4), "the first answer")
    at.switch_page("pages/classifier.py").run(timeout=RUN_TIMEOUT)
    assert not at.exception
    at.switch_page("pages/timeline.py").run(timeout=60)
    assert at.session_state[JOB] is job and not job.done
    [progress] = at.get("progress")
    assert "1/4 requests answered" in progress.proto.text
    assert at.button(key=f"{JOB}_cancel")
    (tmp_path / "gate").touch()
    settle(at, JOB)
    assert job.result is not None and not at.error
    assert run_selector(at).value.startswith("#1 cnn32")
    assert [s.value for s in at.subheader][:1] == ["Strategies compared"]


def test_bad_provider_option_disables_the_run(small_model):
    at = page("timeline", small_model).run()
    at.text_area(key=f"tl_opts_{small_model.digest}").input("not an assignment").run()
    assert "is not NAME=VALUE" in texts(at.error)
    assert at.button(key="tl_run").disabled


def test_devices_page_probes_this_machine_and_rejects_bad_devices():
    at = page("devices").run(timeout=RUN_TIMEOUT)
    assert not at.exception and not at.error
    probe = at.session_state["device_probes"]["local"]  # probed when the page opened, no click needed
    assert probe.backends["htp"].ok is True
    at.button(key="probe_local").click().run(timeout=RUN_TIMEOUT)
    assert not at.exception and not at.error
    probe = at.session_state["device_probes"]["local"]
    assert probe.backends["htp"].ok is True
    backends = at.dataframe[0].value
    assert backends.set_index("backend").loc["htp", "initializes"] == "yes"
    if probe.arch == "x86_64":
        assert "No QNN GPU on this host" in texts(at.info)

    at.text_input[0].input("ftp://board")
    next(b for b in at.button if b.label == "Add device").click().run()
    assert "must be 'local' or ssh://" in texts(at.error)

    url = f"ssh://nobody@127.0.0.1:{closed_port()}"
    at.text_input[0].input(url)
    next(b for b in at.button if b.label == "Add device").click().run()
    assert url in at.session_state["devices"]
    assert at.session_state["device_current"] == url and at.selectbox(key="device_pick").value == url  # just added
    at.button(key=f"probe_{url}").click().run(timeout=RUN_TIMEOUT)
    assert "cannot reach" in texts(at.error)
    at.switch_page("pages/timeline.py").run()  # the device added is what the Timeline page starts on
    assert at.selectbox(key="tl_device").value == url


def test_timeline_end_to_end_in_chromium(stores, tmp_path):
    """The real app in Chromium: open the Timeline page, run it with the defaults of this host's
    hardware, watch it grow, and find the comparison, the Gantt and the latency charts; on the HTP
    simulator the hot migration serves after its swap (the README's screenshot). On a bundled
    sample (the sidebar's Sample source), so the screenshot shows no temporary path."""
    import re

    from dashboard.timeline.model import STRATEGY_TITLES, default_workload
    from dashboard.timeline.remote import target_hardware

    from e2e_helpers import launch_chromium, open_page, require_chromium, running_app, wait_for_idle
    from playwright.sync_api import sync_playwright

    require_chromium()
    with running_app("--model", str(sample_path(SCREENSHOT_SAMPLE))) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        app.open(page)
        wait_for_idle(page)
        open_page(page, "Timeline")
        box = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Strategies")
        area = box.locator('[data-testid="stMultiSelectTagsContainer"]').bounding_box()
        chips = box.locator("[data-tag]")
        inside = [chips.nth(i).get_attribute("aria-label") for i in range(chips.count())
                  if (b := chips.nth(i).bounding_box()) and b["x"] + b["width"] <= area["x"] + area["width"]]
        hardware = target_hardware(Device.parse("local"))
        defaults = default_workload(hardware)
        assert inside == [STRATEGY_TITLES[s] for s in defaults["strategies"]], inside  # in view, none clipped
        assert "Estimated duration" in page.inner_text('[data-testid="stMain"]')  # before Run
        if not defaults["after_swap"]:  # a device's default workload: shortened for the test
            requests = page.get_by_label("Requests", exact=True)
            requests.fill("30")
            requests.press("Enter")
            wait_for_idle(page)
        sidebar = page.inner_text('[data-testid="stSidebar"]')
        assert "/tmp" not in sidebar and str(tmp_path) not in sidebar, sidebar  # the sample, by its title
        page.get_by_role("button", name="Run timeline").click()
        seen: set[int] = set()
        progress = re.compile(r"(\d+)/(\d+) requests answered")
        deadline = page.evaluate("Date.now()") + RUN_TIMEOUT * 1000
        while page.evaluate("Date.now()") < deadline:
            found = progress.search(page.inner_text('[data-testid="stMain"]'))
            if found and int(found.group(1)) < int(found.group(2)):
                seen.add(int(found.group(1)))
            if page.get_by_text("Strategies compared").count():
                break
            page.wait_for_timeout(100)
        wait_for_idle(page)
        assert any(0 < n for n in seen), f"no live progress seen: {sorted(seen)}\n{app.log_text()[-2000:]}"
        main = page.inner_text('[data-testid="stMain"]')
        assert "hot migration" in main and "CPU EP (no QNN GPU on this host)" in main
        assert page.locator(".js-plotly-plot").count() >= 3  # bars, Gantt, latency of the first tab
        if platform.machine() == "x86_64":  # next to the charts: simulator latency is not NPU latency
            assert page.get_by_text("Simulator latency is not NPU latency.").first.is_visible()
        if hardware == "simulator":  # the default workload shows serving after the swap
            assert re.search(r"request\(s\) served after the swap on QNN HTP", main), main[:3000]
        with page.expect_download() as download:
            page.get_by_role("button", name="Run (JSON)").click()
        stem = Path(SCREENSHOT_SAMPLE).stem
        assert re.fullmatch(rf"{stem}-timeline-\d{{8}}T\d{{6}}Z\.json", download.value.suggested_filename)
        if hardware == "simulator":
            migrate = json.loads(Path(download.value.path()).read_text())["strategies"]["migrate"]["metrics"]
            assert migrate["swap_at_s"] is not None and migrate["p50_after_s"] is not None, migrate
        folder = ROOT / "docs" if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path  # the README's
        page.get_by_role("tab", name="hot migration").click()
        # Streamlit scrolls inside its own container: grow the viewport to the page's length first
        height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        page.set_viewport_size({"width": 1600, "height": min(max(height, 1200), 4000)})
        wait_for_idle(page)
        page.screenshot(path=str(folder / "timeline.png"))
        assert (folder / "timeline.png").stat().st_size > 50_000
        browser.close()
