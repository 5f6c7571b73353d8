"""The caches are best-effort (issue 14, item 6): a full disk, an unwritable folder, a directory
or FIFO where an entry should be, or a planted digest never costs a result, never blames the
model, never hangs, and leaves no temporary or empty file behind.

The full disk is real: a 256 KB tmpfs mounted by the test (root only), filled to the last byte,
with a real ``partition`` run of a sample on the HTP simulator caching into it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import partition_models as pm
import pytest
from deadlines import wait_until

from dashboard.intake.samples import sample_path
from dashboard.partition import cache
from dashboard.partition.analysis import PartitionOptions, analyze
from dashboard.runtime.client import PROJECT_ROOT

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("QNN_LAB_CACHE", str(root))
    return root


def leftovers(folder: Path) -> list[str]:
    """Temporary files and empty entries the cache left in ``folder``."""
    return sorted(p.name for p in folder.rglob("*")
                  if p.name.startswith(".part-") or (p.is_file() and p.stat().st_size == 0))


def test_a_fifo_at_an_entry_is_never_opened_for_reading_and_is_removed(cache_root, tmp_path):
    entry = cache.cache_dir() / f"{'0' * 32}.json"
    os.mkfifo(entry)
    result: list = []
    reader = threading.Thread(target=lambda: result.append(cache.read("0" * 32)), daemon=True)
    reader.start()
    reader.join(30)  # a plain open() of a FIFO blocks until a writer comes: forever
    assert not reader.is_alive(), "reading a FIFO entry hung"
    assert result == [None] and not entry.exists()


def test_a_directory_at_an_entry_is_skipped_for_reading_and_writing(cache_root, caplog):
    report = analyze(pm.save(pm.rejects_model(), cache_root.parent, "rejects"), PartitionOptions(backends=("htp",)),
                     timeout=300)
    key = "1" * 32
    entry = cache.cache_dir() / f"{key}.json"
    (entry / "inside").mkdir(parents=True)  # not empty: not ours to delete
    assert cache.read(key) is None
    assert cache.write(key, report) is False  # no traceback, one warning
    assert entry.is_dir() and (entry / "inside").is_dir()
    assert [r.getMessage() for r in caplog.records if "not written" in r.getMessage()] == [
        f"warning: the cache in {cache.cache_dir()} is not written (Is a directory); results are still "
        "returned, uncached"]
    assert cache.write(key, report) is False
    assert len([r for r in caplog.records if "not written" in r.getMessage()]) == 1  # warned once
    assert leftovers(cache.cache_dir()) == []
    empty = cache.cache_dir() / f"{'2' * 32}.json"
    empty.mkdir()
    assert cache.read("2" * 32) is None and not empty.exists()  # an empty directory is removed


def test_a_symlinked_entry_is_not_followed(cache_root, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    entry = cache.cache_dir() / f"{'3' * 32}.json"
    entry.symlink_to(secret)
    assert cache.read("3" * 32) is None
    assert not entry.is_symlink() and secret.read_text() == "{}"  # the link is removed, its target untouched


@pytest.mark.parametrize("digest", ["../../etc", "ABCDEF" * 6, "0" * 31, "0" * 33, "g" * 32, 7])
def test_a_digest_from_digests_json_that_is_not_a_digest_is_ignored(cache_root, tmp_path, digest):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    cache.known_digest(str(model))
    index_path = cache.cache_dir() / "digests.json"
    index = json.loads(index_path.read_text())
    index["files"][str(model)]["digest"] = digest
    index_path.write_text(json.dumps(index))
    assert cache.remembered_digest(str(model)) is None
    assert cache.DIGEST_RE.fullmatch(cache.known_digest(str(model)))  # hashed again, and the index repaired
    assert cache.remembered_digest(str(model)) == cache.known_digest(str(model))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a mode-0500 folder anyway")
def test_an_unwritable_cache_folder_keeps_the_result(cache_root, tmp_path):
    cache.cache_dir().chmod(0o500)
    try:
        report = analyze(pm.save(pm.rejects_model(), tmp_path, "rejects"), PartitionOptions(backends=("htp",)),
                         timeout=300)
    finally:
        cache.cache_dir().chmod(0o700)
    assert report.backends["htp"].status == "measured"


def test_a_read_only_cache_keeps_the_result_and_the_digest_is_not_blamed_on_the_model(tmp_path, monkeypatch):
    """A cache path under a regular file cannot be created (ENOTDIR, as for EROFS or EACCES):
    the analysis is returned, and hashing the model (which writes digests.json) does not fail."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("QNN_LAB_CACHE", str(blocker / "cache"))
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    assert cache.DIGEST_RE.fullmatch(cache.known_digest(str(model)))
    report = analyze(model, PartitionOptions(backends=("htp",)), timeout=300)
    assert report.backends["htp"].status == "measured" and report.digest == cache.known_digest(str(model))


# -- a real full disk ---------------------------------------------------------------------------------
@contextlib.contextmanager
def full_tmpfs(folder: Path):
    """A 256 KB tmpfs at ``folder`` with its ``partitions`` cache folder made, then filled to the
    last byte; unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(folder)],
                             capture_output=True, text=True, timeout=60)
    if mounted.returncode != 0:
        pytest.skip(f"mount is not permitted here: {mounted.stderr.strip()}")
    try:
        (folder / "partitions").mkdir()
        with open(folder / "filler", "wb", buffering=0) as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
        with pytest.raises(OSError):  # the disk is full for real
            (folder / "probe").write_bytes(b"x" * 4096)
        (folder / "probe").unlink(missing_ok=True)
        yield folder
    finally:
        unmount(folder)


def unmount(folder: Path) -> None:
    """Unmount ``folder`` once nothing uses it: a worker whose working folder is in it (the
    cache's ``worker``) may still be exiting, reaped on a thread after the test's last call on a
    loaded machine. Never forced: a process still inside after the deadline fails the test."""
    def unmounted() -> bool:
        return subprocess.run(["umount", str(folder)], capture_output=True, timeout=60).returncode == 0

    wait_until(unmounted, f"unmounting {folder} (a process still uses it)", interval=0.2)


def test_a_full_cache_disk_keeps_the_partition_result(tmp_path):
    with full_tmpfs(tmp_path / "full") as disk:
        env = {**os.environ, "QNN_LAB_CACHE": str(disk), "PYTHONPATH": str(PROJECT_ROOT)}
        done = subprocess.run([sys.executable, "-m", "dashboard", "partition", str(sample_path("cnn_classifier.onnx"))],
                              capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=540)
        left = leftovers(disk / "partitions")
        entries = sorted(p.name for p in (disk / "partitions").iterdir())
    assert done.returncode == 0, done.stderr
    assert "cnn_classifier" in done.stdout and "HTP" in done.stdout  # the result is printed
    assert not any(blame in done.stderr for blame in ("cannot read it", "internal error", "Traceback"))
    warnings = [line for line in done.stderr.splitlines() if "is not written" in line]
    assert warnings == [f"warning: the cache in {disk / 'partitions'} is not written (No space left on device); "
                        "results are still returned, uncached"]
    assert left == [] and entries == []  # no .part-*, no empty entry, no empty gpu_probe.json
    print(done.stdout[-600:])


PAGE = """
from dashboard.views import state
if state.current_model() is None:
    state.select({path!r}, "test model", "path")
from dashboard.views.partitions import render
render()
"""


def test_a_full_cache_disk_keeps_the_result_on_the_partitions_page(tmp_path, monkeypatch):
    """The dashboard's path: the page's background job finishes its analysis and shows it,
    instead of "internal error (OSError: [Errno 28] No space left on device)"."""
    from page_jobs import settle
    from streamlit.testing.v1 import AppTest

    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    with full_tmpfs(tmp_path / "full") as disk:
        monkeypatch.setenv("QNN_LAB_CACHE", str(disk))
        at = settle(AppTest.from_string(PAGE.format(path=str(model)), default_timeout=300))
        left = leftovers(disk / "partitions")
    job = at.session_state["partition_job"]
    assert job.error is None and job.result is not None and not at.error
    assert any(s.value == "2 node(s) keep the model off the NPU" for s in at.subheader)
    assert left == []
