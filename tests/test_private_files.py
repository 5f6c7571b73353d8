"""What the lab writes to disk is this user's only: every cache folder it makes is 0700 (with the
missing parents it makes), cache entries and a sweep's files (records, manifest, index, lock) are
0600, and the node copies of a Ray sweep's models too. Real files, under the usual umask 022 (the
one that made them 0755 and 0644 before)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sweep_helpers import write_models, write_spec

from dashboard import platform
from dashboard.sweep.cells import CellResult
from dashboard.sweep.spec import load_spec
from dashboard.sweep.store import Store, run_sweep


@pytest.fixture(autouse=True)
def usual_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def modes_below(top: Path) -> dict[str, int]:
    return {str(p.relative_to(top)): mode(p) for p in [top, *top.rglob("*")]}


def test_a_sweeps_folder_is_0700_and_every_file_it_writes_0600(tmp_path):
    write_models(tmp_path / "models", 2)
    spec = write_spec(tmp_path / "spec.toml", 'models = ["models/*.onnx"]\nsocs = ["sm8650"]\nanalyses = ["classify"]\n')

    def run_one(cell, cancel):
        return CellResult(cell=cell, status="ok", verdicts={"ep": "NonGenAI", "refined": "NonGenAI"},
                          routes={"ep": "htp", "refined": "htp"})

    out = tmp_path / "deep" / "out"
    progress = run_sweep(load_spec(spec), Store(out, create=True), run_one=run_one, jobs=1)
    assert progress.ran == 2
    found = modes_below(out)
    assert {name for name in found if name.startswith("cells/")} and "index.parquet" in found and ".lock" in found
    folders = {name: m for name, m in found.items() if (out / name).is_dir()}
    files = {name: m for name, m in found.items() if not (out / name).is_dir()}
    assert set(folders.values()) == {0o700}, folders
    assert set(files.values()) == {0o600}, files
    assert mode(tmp_path / "deep") == 0o700  # a missing parent the sweep made, too


def test_a_results_folder_may_be_given_as_a_symlink_on_the_command_line_but_not_into_a_root(tmp_path):
    """The terminal's own ``--out`` is the user's choice; ``inside`` (a page's run) refuses it."""
    from dashboard.errors import UserError

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "root").mkdir()
    link = tmp_path / "root" / "x.results"
    link.symlink_to(real, target_is_directory=True)
    Store(link, create=True)
    assert (real / "cells").is_dir()
    with pytest.raises(UserError, match="is a symlink"):
        Store(link, create=True, inside=tmp_path / "root")
    (tmp_path / "root" / "y.results").mkdir()
    (tmp_path / "root" / "y.results" / "cells").symlink_to(real, target_is_directory=True)
    with pytest.raises(UserError, match="cells: refusing"):
        Store(tmp_path / "root" / "y.results", create=True, inside=tmp_path / "root")
    Store(tmp_path / "root" / "z.results", create=True, inside=tmp_path / "root")  # a real one of its own


def test_a_planted_symlink_at_the_index_being_written_is_replaced_not_written_through(tmp_path):
    write_models(tmp_path / "models", 1)
    spec = write_spec(tmp_path / "spec.toml", 'models = ["models/*.onnx"]\nsocs = ["sm8650"]\nanalyses = ["classify"]\n')
    out = tmp_path / "out"
    store = Store(out, create=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "index.parquet.partial").symlink_to(victim)
    run_sweep(load_spec(spec), store, run_one=lambda cell, cancel: CellResult.failure(cell, "fake"), jobs=1)
    assert victim.read_text() == "keep me"
    assert (out / "index.parquet").is_file() and not (out / "index.parquet").is_symlink()


def cache_folders(tmp_path, monkeypatch) -> dict[str, Path]:
    """Each on-disk cache, made through its own function under a fresh ``QNN_LAB_CACHE``."""
    cache = tmp_path / "home" / ".cache" / "qnn-backend-lab"
    monkeypatch.setenv("QNN_LAB_CACHE", str(cache))
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(cache / "models"))
    monkeypatch.delenv("QNN_LAB_CONTEXT_STORE", raising=False)
    from dashboard.partition.cache import cache_dir
    from dashboard.runtime.client import worker_cwd
    from dashboard.runtime.worker import model_store
    from dashboard.timeline.runner import context_store

    return {"partitions": cache_dir(), "worker": worker_cwd(), "models": model_store(), "contexts": context_store()}


def test_every_cache_folder_and_the_folders_above_it_that_it_makes_are_0700(tmp_path, monkeypatch):
    found = cache_folders(tmp_path, monkeypatch)
    for name, folder in found.items():
        assert folder.is_dir() and mode(folder) == 0o700, (name, oct(mode(folder)))
    for made in (tmp_path / "home", tmp_path / "home" / ".cache", tmp_path / "home" / ".cache" / "qnn-backend-lab"):
        assert mode(made) == 0o700, made
    existing = tmp_path / "mine"
    existing.mkdir(mode=0o750)
    platform.private_folder(existing / "new")
    assert mode(existing) == 0o750 and mode(existing / "new") == 0o700  # a folder that was there is left alone


def test_cache_entries_are_0600(tmp_path, monkeypatch):
    from dashboard.partition.cache import write_json
    from dashboard.sweep.ray_exec import external_copy, node_copy
    from dashboard.intake.digest import content_hasher

    found = cache_folders(tmp_path, monkeypatch)
    assert write_json(found["partitions"] / "entry.json", {"a": 1})
    data = b"model bytes"
    hasher = content_hasher()
    hasher.update(data)
    copy = node_copy(hasher.hexdigest(), "m.onnx", data)
    external = external_copy(copy.parent, "weights/w.bin", data, hasher.hexdigest())
    for path in (found["partitions"] / "entry.json", copy, external):
        assert mode(path) == 0o600, (path, oct(mode(path)))
    for folder in (copy.parent, copy.parent.parent, external.parent):
        assert mode(folder) == 0o700, folder


def test_a_model_sent_to_the_worker_is_stored_0600_in_a_0700_folder(tmp_path, monkeypatch):
    import base64

    from dashboard.intake.digest import file_digest
    from dashboard.runtime.protocol import ModelChunk
    from dashboard.runtime.worker import put_model

    found = cache_folders(tmp_path, monkeypatch)
    source = tmp_path / "m.onnx"
    source.write_bytes(b"not really a model, but bytes with a digest")
    digest = file_digest(source)
    reply = put_model(ModelChunk(digest=digest, name="m.onnx", offset=0, data=base64.b64encode(source.read_bytes())
                                 .decode(), final=True), lambda record: None)
    stored = Path(reply.path)
    assert stored.read_bytes() == source.read_bytes()
    assert mode(stored) == 0o600 and mode(stored.parent) == 0o700 and stored.parent.parent == found["models"]
