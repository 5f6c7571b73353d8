"""Uploads (``dashboard.intake.uploads`` and the sidebar's upload path): a private folder that a
planted symlink cannot redirect, one copy per content whatever the name, a quota with
least-recently-used removal of unused files, files removed with the last session that shows
them (in this process and across processes), and, end to end, a server whose private memory
holds one upload's bytes (Streamlit's own copy), not two per upload."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from deadlines import within

from dashboard.errors import UserError
from dashboard.intake import uploads
from dashboard.intake.digest import file_digest
from dashboard.intake.samples import SAMPLES, sample_path

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def upload_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(uploads.ENV_DIR, str(tmp_path / "uploads"))
    monkeypatch.delenv(uploads.ENV_QUOTA, raising=False)
    return tmp_path / "uploads"


def store(data: bytes) -> uploads.Lease:
    return uploads.store(io.BytesIO(data), len(data))


def entries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.startswith("."))


# -- the folder ----------------------------------------------------------------------------------

def test_folder_is_created_private(upload_dir):
    lease = store(b"model bytes")
    assert (os.stat(upload_dir).st_mode & 0o777) == 0o700
    assert lease.path.read_bytes() == b"model bytes" and lease.path.parent.parent == upload_dir
    assert (os.stat(lease.path.parent).st_mode & 0o077) == 0


def test_default_folder_is_per_user(monkeypatch, tmp_path):
    monkeypatch.delenv(uploads.ENV_DIR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = uploads.upload_root()
    assert root == tmp_path / "home" / ".cache" / "qnn-backend-lab" / "uploads"
    assert (os.stat(root).st_mode & 0o777) == 0o700 and store(b"model").path.parent.parent == root


def test_without_a_usable_home_uploads_go_to_a_random_private_folder_kept_for_the_process(monkeypatch, tmp_path):
    monkeypatch.delenv(uploads.ENV_DIR)
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "not-a-folder"))  # its .cache cannot be created
    monkeypatch.setattr(uploads.tempfile, "tempdir", str(tmp_path))
    first, second = store(b"one"), store(b"two")
    root = first.path.parent.parent
    assert root.parent == tmp_path and root.name.startswith("qnn-backend-lab-uploads-")
    assert root.name != f"qnn-backend-lab-uploads-{os.getuid()}" and second.path.parent.parent == root
    assert (os.stat(root).st_mode & 0o777) == 0o700


@pytest.fixture(scope="module")
def other_user():
    """A second OS account, created for these tests and deleted after them (root only)."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("creating a second OS user needs root and useradd")
    name = f"qbl{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name], capture_output=True, text=True,
                          timeout=60)
    if made.returncode != 0:
        pytest.skip(f"useradd is not permitted here: {made.stderr.strip()}")
    try:
        yield name, pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False, timeout=60)


def test_a_folder_another_user_made_at_the_old_fixed_path_does_not_stop_uploads(monkeypatch, tmp_path, other_user):
    """The old default, ``<tmp>/qnn-backend-lab-uploads-<uid>``, made first by another account
    (as that account, in a shared sticky temp folder) used to refuse every upload."""
    name, uid = other_user
    monkeypatch.delenv(uploads.ENV_DIR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    shared = Path(tempfile.mkdtemp(prefix="qbl-shared-tmp-", dir="/tmp"))  # reachable by the other user
    try:
        shared.chmod(0o1777)
        monkeypatch.setattr(uploads.tempfile, "tempdir", str(shared))
        planted = shared / f"qnn-backend-lab-uploads-{os.getuid()}"
        subprocess.run(["runuser", "-u", name, "--", "mkdir", "-m", "0777", str(planted)], check=True, timeout=60)
        assert planted.stat().st_uid == uid
        lease = store(b"model bytes")
        assert lease.path.read_bytes() == b"model bytes"
        assert lease.path.parent.parent == tmp_path / "home" / ".cache" / "qnn-backend-lab" / "uploads"
        assert list(planted.iterdir()) == []  # nothing went to the other user's folder
    finally:
        shutil.rmtree(shared)


def test_another_user_s_folder_at_the_home_path_is_not_used(monkeypatch, tmp_path, other_user):
    _, uid = other_user
    monkeypatch.delenv(uploads.ENV_DIR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    foreign = tmp_path / "home" / ".cache" / "qnn-backend-lab" / "uploads"
    foreign.mkdir(parents=True, mode=0o700)
    os.chown(foreign, uid, -1)
    lease = store(b"model bytes")
    root = lease.path.parent.parent  # this process's random folder (made here, or by an earlier upload)
    assert root != foreign and root.name.startswith("qnn-backend-lab-uploads-")
    assert root.stat().st_uid == os.getuid() and (root.stat().st_mode & 0o777) == 0o700
    assert list(foreign.iterdir()) == []


def test_planted_symlink_is_refused_and_nothing_is_written_through_it(upload_dir, tmp_path):
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    upload_dir.symlink_to(attacker, target_is_directory=True)
    with pytest.raises(UserError, match="is a symlink"):
        store(b"secret model")
    assert list(attacker.iterdir()) == []


def test_folder_open_to_others_is_refused(upload_dir):
    upload_dir.mkdir(mode=0o755)
    os.chmod(upload_dir, 0o755)
    with pytest.raises(UserError, match="open to other users"):
        store(b"model")


# -- one copy per content ------------------------------------------------------------------------

def test_same_content_is_stored_once_and_removed_after_the_last_lease(upload_dir):
    first, second = store(b"same model"), store(b"same model")
    assert first.path == second.path and entries(upload_dir) == [first.digest]
    assert first.digest == file_digest(first.path)  # the key every cache uses
    del first
    gc.collect()
    assert second.path.exists()  # the other lease still shows it
    path = second.path
    del second
    gc.collect()
    assert not path.exists() and entries(upload_dir) == []


def test_a_failed_write_leaves_no_partial_file(upload_dir):
    class Broken(io.BytesIO):
        def read(self, size=-1):
            if self.tell() > 0:
                raise OSError("connection reset")
            return super().read(4)

    with pytest.raises(OSError):
        uploads.store(Broken(b"0123456789"), 10)
    assert list(upload_dir.iterdir()) == []


# -- quota -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("", uploads.DEFAULT_QUOTA), ("1000", 1000), ("500M", 500 << 20),
                                            ("4G", 4 << 30), ("2GB", 2 << 30), ("1.5g", int(1.5 * (1 << 30))),
                                            ("64KiB", 64 << 10)])
def test_quota_parsing(monkeypatch, text, expected):
    monkeypatch.setenv(uploads.ENV_QUOTA, text)
    assert uploads.quota() == expected


def test_bad_quota_is_one_line(monkeypatch):
    monkeypatch.setenv(uploads.ENV_QUOTA, "lots")
    with pytest.raises(UserError, match="QNN_LAB_UPLOAD_QUOTA='lots' is not a size"):
        store(b"x")


def test_upload_larger_than_the_quota_is_refused(monkeypatch, upload_dir):
    monkeypatch.setenv(uploads.ENV_QUOTA, "100")
    with pytest.raises(UserError, match="more than the upload quota"):
        store(bytes(101))
    assert not upload_dir.exists() or entries(upload_dir) == []


def _orphan(root: Path, name: str, size: int, age: float) -> Path:
    """An upload left by a server that was killed: on disk, leased by nobody."""
    entry = root / name
    entry.mkdir(parents=True)
    (entry / uploads.MODEL_FILE).write_bytes(bytes(size))
    stamp = time.time() - age
    os.utime(entry, (stamp, stamp))
    return entry


def test_unused_uploads_are_removed_least_recently_used_first(monkeypatch, upload_dir):
    monkeypatch.setenv(uploads.ENV_QUOTA, "1000")
    uploads.upload_root()
    oldest, older, recent = (_orphan(upload_dir, f"{i:032x}", 300, age) for i, age in enumerate((300, 200, 100)))
    lease = store(bytes(500))  # 900 + 500 > 1000: the two oldest go, the recent one fits next to it
    assert not oldest.exists() and not older.exists() and recent.exists()
    assert entries(upload_dir) == sorted([recent.name, lease.digest])


def test_uploads_in_use_are_never_removed_for_room(monkeypatch, upload_dir):
    monkeypatch.setenv(uploads.ENV_QUOTA, "1000")
    shown = store(bytes(600))
    with pytest.raises(UserError, match="no room for a"):
        store(b"\x01" * 600)
    assert shown.path.read_bytes() == bytes(600) and entries(upload_dir) == [shown.digest]


# -- across processes ----------------------------------------------------------------------------

HOLD = """
import io, sys, time
from dashboard.intake import uploads
lease = uploads.store(io.BytesIO(b"shared model"), 12)
print(lease.path, flush=True)
sys.stdin.readline()  # hold the lease until told to exit
"""


def test_a_file_another_process_uses_survives_until_it_exits(upload_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        path = Path(within(holder.stdout.readline, "the holding process's lease path").strip())
        mine = store(b"shared model")
        assert mine.path == path
        del mine
        gc.collect()
        assert path.exists()  # the other process still holds it
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0 and not path.exists()  # its lease went at exit, the file with it


# -- the sidebar (AppTest) ----------------------------------------------------------------------------

def selected(at):
    return at.session_state["selected_model"] if "selected_model" in at.session_state else None


def upload(at, name: str, data: bytes) -> None:
    at.sidebar.segmented_control(key="intake_mode").set_value("Upload").run()
    at.sidebar.file_uploader(key="intake_upload").upload(name, data).run()


def errors(at) -> list[str]:
    return [e.value.replace("\\", "") for e in at.error]


def test_one_file_uploaded_under_two_names_is_stored_once(app, upload_dir):
    data = sample_path("cnn_classifier.onnx").read_bytes()
    at = app().run()
    upload(at, "first.onnx", data)
    first = selected(at)
    upload(at, "second name.onnx", data)
    assert not errors(at) and selected(at).name == "second name.onnx"
    assert selected(at).path == first.path and entries(upload_dir) == [first.digest]


def test_moving_on_from_an_upload_removes_its_file(app, upload_dir):
    at = app().run()
    upload(at, "mine.onnx", sample_path("text_encoder.onnx").read_bytes())
    path = Path(selected(at).path)
    at.sidebar.segmented_control(key="intake_mode").set_value("Sample").run()
    at.sidebar.selectbox(key="intake_sample").set_value(SAMPLES[1].file_name).run()
    gc.collect()
    assert selected(at).source == "sample" and not path.exists()


def test_a_closed_session_removes_its_upload(app, upload_dir):
    at = app().run()
    upload(at, "mine.onnx", sample_path("cnn_classifier.onnx").read_bytes())
    path = Path(selected(at).path)
    assert path.exists()
    del at  # the session and its state go
    gc.collect()
    assert not path.exists()


def test_a_failed_upload_keeps_the_previous_upload_and_leaves_nothing(app, upload_dir):
    at = app().run()
    upload(at, "good.onnx", sample_path("cnn_classifier.onnx").read_bytes())
    good = selected(at)
    upload(at, "broken.onnx", sample_path("text_encoder.onnx").read_bytes()[:700])
    gc.collect()
    assert len(errors(at)) == 1 and errors(at)[0].startswith("broken.onnx: ")
    assert str(upload_dir) not in errors(at)[0]  # the user knows it by its name
    assert selected(at) == good and entries(upload_dir) == [good.digest]


def test_planted_symlink_upload_folder_is_an_error_and_the_model_stays(app, upload_dir, tmp_path):
    (tmp_path / "attacker").mkdir()
    upload_dir.symlink_to(tmp_path / "attacker", target_is_directory=True)
    at = app().run()
    before = selected(at)
    upload(at, "mine.onnx", sample_path("cnn_classifier.onnx").read_bytes())
    assert not at.exception and len(errors(at)) == 1 and "is a symlink" in errors(at)[0]
    assert selected(at) == before and list((tmp_path / "attacker").iterdir()) == []


def test_upload_over_the_quota_is_an_error_and_the_model_stays(app, monkeypatch):
    monkeypatch.setenv(uploads.ENV_QUOTA, "10K")
    at = app().run()
    before = selected(at)
    upload(at, "big.onnx", sample_path("cnn_classifier.onnx").read_bytes())
    assert not at.exception and len(errors(at)) == 1 and "upload quota" in errors(at)[0]
    assert selected(at) == before


# -- the server's memory, end to end -------------------------------------------------------------------

UPLOAD_MB = 100
UPLOADS = 3


def _write_big_model(path: Path, seed: int) -> int:
    """A valid one-MatMul model with an embedded UPLOAD_MB weight (zeros, written as a hole)."""
    from onnx import TensorProto, helper

    def field(number: int, size: int) -> bytes:
        out, value = bytearray(), number << 3 | 2
        for item in (value, size):
            while item >= 0x80:
                out.append(item & 0x7F | 0x80)
                item >>= 7
            out.append(item)
        return bytes(out)

    cols = UPLOAD_MB * (1 << 20) // 4 // 1024
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name=f"matmul_{seed}")], f"big_{seed}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.ClearField("graph")
    size = 1024 * cols * 4
    tensor = TensorProto(name="W", dims=[1024, cols], data_type=TensorProto.FLOAT).SerializeToString() + field(9, size)
    graph_head = graph.SerializeToString() + field(5, len(tensor) + size) + tensor
    with open(path, "wb") as handle:
        handle.write(model.SerializeToString() + field(7, len(graph_head) + size) + graph_head)
        handle.truncate(handle.tell() + size)
    return path.stat().st_size


@contextlib.contextmanager
def upload_page(root: Path):
    """``(app, page, upload)``: the dashboard storing uploads in ``root``, open in Chromium on the
    sidebar's Upload mode; ``upload(path)`` uploads a file and waits for the page to settle."""
    from e2e_helpers import launch_chromium, require_chromium, running_app, wait_for_idle

    require_chromium()
    from playwright.sync_api import sync_playwright

    with running_app("--model", "samples/cnn_classifier.onnx", env={uploads.ENV_DIR: str(root)}) as app, \
            sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            app.open(page)
            wait_for_idle(page)
            page.locator('[data-testid="stSidebar"] [data-testid="stButtonGroup"]').get_by_text(
                "Upload", exact=True).click()
            wait_for_idle(page)

            def upload(path: Path) -> None:
                page.locator('[data-testid="stSidebar"] input[type="file"]').set_input_files(str(path))
                wait_for_idle(page, timeout=180)

            yield app, page, upload
        finally:
            browser.close()


def _private_mb(pid: int) -> int:
    """Anonymous resident memory: what the server's own objects hold. File pages mapped by the
    Netron viewer are page cache, shared and reclaimable, so they are left out."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:")) // 1024


def test_server_keeps_one_copy_of_an_upload_not_two_per_upload(tmp_path):
    """Three 100 MB uploads through the browser into a real server. Before, each stayed in
    private memory twice (Streamlit's copy and the copy ``getbuffer`` made), about +200 MB per
    upload held; now the upload is streamed to disk and only Streamlit's copy of the file shown
    in the uploader remains, replaced (not added to) by the next one. (RssAnon: the file pages the
    Netron viewer maps are page cache, not the server's memory.)"""
    from e2e_helpers import wait_for_idle

    files = [tmp_path / f"big_{i}.onnx" for i in range(UPLOADS)]
    size_mb = _write_big_model(files[0], 0) >> 20
    for i, path in enumerate(files[1:], 1):
        _write_big_model(path, i)
    with upload_page(tmp_path / "uploads") as (app, page, upload):
        before = _private_mb(app.process.pid)
        held = []
        for path in files:
            upload(path)
            assert path.name in page.locator('[data-testid="stSidebar"]').inner_text(), app.log_text()[-2000:]
            # One more run (Streamlit's "r" shortcut): the previous upload's widget value lives in
            # the session state until the next run starts, so a copy may outlive a run by one.
            page.locator('[data-testid="stMain"]').press("r")
            wait_for_idle(page, timeout=180)
            held.append(_private_mb(app.process.pid) - before)
    stored = list((tmp_path / "uploads").glob("*/model.onnx"))
    assert stored == []  # the stopped server removed what its sessions held
    assert held[-1] < 1.5 * size_mb, held  # one copy (Streamlit's), not two per upload
    assert held[-1] - held[0] < 0.5 * size_mb, held  # and it does not add up


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_a_signalled_server_removes_the_uploads_its_sessions_hold(tmp_path, how):
    """The web server (uvicorn, under ``st.App``) re-raises SIGTERM with its default action once
    it has shut down, which skips ``atexit`` (and so ``weakref.finalize``), and does not handle
    SIGHUP at all: the gate's shutdown runs the exit hooks, and relays SIGHUP to the graceful
    shutdown, so an upload a session holds is still removed."""
    import signal

    root = tmp_path / "uploads"
    with upload_page(root) as (app, _page, upload):
        upload(sample_path("text_encoder.onnx"))
        assert list(root.glob("*/model.onnx")), "the upload was not stored"
        app.process.send_signal(getattr(signal, how))
        app.process.wait(timeout=60)
    assert list(root.glob("*/model.onnx")) == []
