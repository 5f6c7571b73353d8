"""Sweeps on a real Ray cluster (``tests/ray_cluster.py``: a head and a second node on loopback,
one CPU each): the samples × 2 SoCs give the same cells as ``--jobs``, cells run on both nodes,
each model goes to the object store once, and the cluster is stopped to its last process. Ray is
imported by the ``--ray`` executor alone: a sweep without it never loads Ray."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ray_cluster import CLIENT_ENV, RAY, ray_cluster
from sweep_helpers import chain_model, write_spec
from test_layering import importers_of

ROOT = Path(__file__).resolve().parent.parent
SWEEP_TIMEOUT = 1200  # seconds: 20 cells, two of them compile the decoder, on a loaded 2-core machine
SAMPLES = sorted(p.name for p in (ROOT / "samples").glob("*.onnx"))
# What two runs of the same cell must agree on (where and how long it ran may differ).
SAME = ("model", "soc", "option_set", "analysis", "status", "reason", "htp_coverage", "htp_claimed", "htp_nodes",
        "cpu_nodes", "verdicts", "routes", "hardware")


def sweep(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", "sweep", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=SWEEP_TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "QNN_LAB_CACHE": str(cache), **(env or {})})


def samples_spec(folder: Path) -> Path:
    """The bundled samples, copied (so the spec names them relative to itself), × 2 SoCs."""
    (folder / "samples").mkdir(parents=True)
    for name in SAMPLES:
        shutil.copy(ROOT / "samples" / name, folder / "samples" / name)
    return write_spec(folder / "spec.toml", 'models = ["samples/*.onnx"]\nsocs = ["sm8650", "sc8380xp"]\n')


def external_data_spec(folder: Path) -> Path:
    """One small model whose every tensor sits in an external-data file next to it."""
    import onnx
    from onnx import numpy_helper

    model = chain_model()
    for tensor in model.graph.initializer:  # as raw bytes: onnx moves only those to external data
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor), tensor.name))
    folder.mkdir(parents=True)
    onnx.save_model(model, folder / "chain.onnx", save_as_external_data=True,
                    all_tensors_to_one_file=True, location="chain.onnx.data", size_threshold=0)
    assert (folder / "chain.onnx.data").is_file()
    return write_spec(folder / "spec.toml", 'models = ["chain.onnx"]\nsocs = ["sm8650"]\n'
                      'analyses = ["partition", "classify"]\n')


def cells(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["cells"]


def comparable(found: list[dict]) -> list[tuple]:
    return sorted(tuple(json.dumps(c.get(k), sort_keys=True) for k in SAME) for c in found)


def node_ids(status: str) -> set[str]:
    active = status.split("Active:", 1)[1].split("Pending:", 1)[0]
    return {line.strip().split("node_", 1)[1] for line in active.splitlines() if "node_" in line}


def test_a_sweep_on_a_two_node_cluster_gets_the_cells_of_jobs_and_uses_both_nodes(tmp_path):
    spec = samples_spec(tmp_path / "zoo")
    local = cells(sweep(str(spec), "--out", str(tmp_path / "out-jobs"), "--jobs", "2", "--json", "--force",
                        cache=tmp_path / "cache-jobs"))
    external_spec = external_data_spec(tmp_path / "external")
    extdata_local = cells(sweep(str(external_spec), "--out", str(tmp_path / "out-ext-jobs"), "--jobs", "1", "--json",
                                "--force", cache=tmp_path / "cache-ext-jobs"))
    with ray_cluster(nodes=2, env={"QNN_LAB_CACHE": str(tmp_path / "cache-nodes")}) as cluster:
        status = subprocess.run([RAY, "status", "--address", cluster.address], capture_output=True, text=True,
                                timeout=120, env={**os.environ, **CLIENT_ENV}).stdout
        done = sweep(str(spec), "--out", str(tmp_path / "out-ray"), "--ray", cluster.address, "--json", "--force",
                     cache=tmp_path / "cache-ray")
        on_ray = cells(done)
        extdata = cells(sweep(str(external_spec), "--out", str(tmp_path / "out-ext-ray"), "--ray", cluster.address,
                              "--json", "--force", cache=tmp_path / "cache-ext-ray"))
        assert len(cluster.processes()) > 0
    assert not cluster.processes()  # stopped: every process it started, and nothing else was asked to stop

    assert len(on_ray) == len(local) == len(SAMPLES) * 2 * 2
    assert comparable(on_ray) == comparable(local)
    assert {c["status"] for c in on_ray} == {"ok"}
    assert {c["executor"] for c in on_ray} == {"ray"} and {c["executor"] for c in local} == {"local"}
    ran_on = {c["node"].split(" ", 1)[0] for c in on_ray}
    assert ran_on == node_ids(status), (ran_on, status)  # both nodes, named by the ids the head lists
    assert {c["node"].split(" ", 1)[1] for c in on_ray} <= {"(127.0.0.1)", "(::ffff:127.0.0.1)"}
    # Each model went to the cluster once, not once per cell; the nodes kept one copy per digest.
    assert f"ray: {len(SAMPLES)} model(s) sent to the cluster's object store for {len(on_ray)} cell(s)" in done.stderr
    copies = sorted(p.parent.name for p in (tmp_path / "cache-nodes" / "sweep-models").glob("*/*.onnx"))
    assert len(copies) == len(set(copies)) == len(SAMPLES) + 1
    # A model with external data: its file went with it, next to the node's copy, same cells as --jobs 1.
    assert {c["status"] for c in extdata} == {"ok"} and len(extdata) == 2, extdata
    assert comparable(extdata) == comparable(extdata_local)
    assert {c["executor"] for c in extdata} == {"ray"}
    from dashboard.intake.digest import file_digest

    digest = file_digest(tmp_path / "external" / "chain.onnx")
    node_copy = tmp_path / "cache-nodes" / "sweep-models" / digest
    assert (node_copy / "chain.onnx.data").read_bytes() == (tmp_path / "external" / "chain.onnx.data").read_bytes()


def test_an_unreachable_cluster_is_one_error_line_before_anything_is_written(tmp_path):
    spec = write_spec(tmp_path / "spec.toml", f'models = ["{ROOT / "samples" / "cnn_classifier.onnx"}"]\n'
                      'socs = ["sm8650"]\nanalyses = ["classify"]\n')
    if not Path(RAY).exists():
        pytest.skip("Ray is not installed in this environment; `make test` installs it")
    from e2e_helpers import free_port

    done = sweep(str(spec), "--out", str(tmp_path / "out"), "--ray", f"127.0.0.1:{free_port()}", cache=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "cannot reach the Ray cluster" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "cells").exists() or not any((tmp_path / "out" / "cells").iterdir())


def test_only_the_ray_executor_imports_ray():
    assert importers_of("ray") == {"dashboard.sweep.ray_exec"}


def test_a_sweep_without_ray_never_loads_it(tmp_path):
    spec = write_spec(tmp_path / "spec.toml", f'models = ["{ROOT / "samples" / "cnn_classifier.onnx"}"]\n'
                      'socs = ["sm8650"]\nanalyses = ["classify"]\n')
    code = ("import sys\nfrom dashboard.cli.main import main\n"
            f"code = main(['sweep', {str(spec)!r}, '--out', {str(tmp_path / 'out')!r}, '--jobs', '1'])\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "QNN_LAB_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_node_writes_external_data_only_as_a_plain_relative_path_inside_the_models_folder(tmp_path):
    from dashboard.intake.digest import content_hasher
    from dashboard.sweep.ray_exec import external_copy

    data = b"weights"
    hasher = content_hasher()
    hasher.update(data)
    digest = hasher.hexdigest()
    folder, outside = tmp_path / "copy", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "out").symlink_to(outside, target_is_directory=True)
    for location in ("../escape.data", str(outside / "abs.data"), "sub/../x.data", "out/link.data", ""):
        with pytest.raises(ValueError, match="refusing external-data location"):
            external_copy(folder, location, data, digest)
    with pytest.raises(ValueError, match="do not match their digest"):
        external_copy(folder, "w.data", b"other", digest)
    assert not list(outside.iterdir()) and not (tmp_path / "escape.data").exists()
    assert external_copy(folder, "sub/w.data", data, digest).read_bytes() == data
