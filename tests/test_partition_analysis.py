"""The orchestrator: cache, worker crash and hang, device-report import, classes from both backends."""

from __future__ import annotations

import json
import sys

import partition_models as pm
import pytest

from dashboard.errors import UserError
from dashboard.messages import Stage
from dashboard.partition.analysis import PartitionOptions, analyze, parse_assignments
from dashboard.partition.report import PartitionReport

# Workers whose ``partition`` command crashes natively, or reports progress and then hangs.
CRASHING_WORKER = [sys.executable, "-c", "import dashboard.messages as m, dashboard.runtime.worker as w\n"
                   "m.COMMANDS['partition'] = m.COMMANDS['partition']._replace(handler='dashboard.runtime.worker:crash')\n"
                   "w.serve()"]
HANGING_WORKER = [sys.executable, "-c", "import time, dashboard.messages as m, dashboard.runtime.worker as w\n"
                  "def hang(args, emit):\n"
                  "    emit(m.Stage('compiling', 0.5))\n"
                  "    time.sleep(600)\n"
                  "m.COMMANDS['partition'] = m.COMMANDS['partition']._replace(handler='__main__:hang')\nw.serve()"]


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(tmp_path / "store"))


@pytest.fixture
def rejects(tmp_path):
    return pm.save(pm.rejects_model(), tmp_path, "rejects")


def test_classes_and_cache(rejects):
    events = []
    first = analyze(rejects, PartitionOptions(), on_event=events.append)
    assert not first.cached
    assert [e.stage for e in events if isinstance(e, Stage)][-1] == "done"
    classes = first.classes
    assert set(classes.both) == {"conv0", "Relu#1", "mul0", "sig0"}
    assert set(classes.neither) == {"erf0", "mod0"}  # refused by HTP, predicted refused by GPU
    assert classes.gpu_only == classes.htp_only == classes.removed == []
    assert first.node_order == ["conv0", "Relu#1", "erf0", "mod0", "mul0", "sig0"]
    assert [s.backend for s in first.plans["intersection"].segments] == ["migrating", "cpu", "migrating"]
    second = analyze(rejects, PartitionOptions())
    assert second.cached
    assert second.classes.to_json() == classes.to_json() and second.plans == first.plans
    other = analyze(rejects, PartitionOptions(dims={"unused": 2}))  # other options, other entry
    assert not other.cached


CORRUPTIONS = {
    "not JSON": b"{\"schema\": ",
    "null backends": None,  # filled in below from the real entry
    "a JSON list": b"[1, 2, 3]",
    "100,000-deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "deep inside a free-form field": None,
    "wrong type": None,
    "another schema version": None,
}


def corrupt(entry: dict, how: str) -> bytes:
    if CORRUPTIONS[how] is not None:
        return CORRUPTIONS[how]
    broken = json.loads(json.dumps(entry))
    if how == "null backends":
        broken["backends"] = None
    elif how == "deep inside a free-form field":
        broken["options"]["provider_options"] = {"x": json.loads("[" * 500 + "]" * 500)}
    elif how == "wrong type":
        next(iter(broken["backends"]["htp"]["nodes"].values()))["supported"] = "yes"
    else:
        broken["schema"] = "qnn-backend-lab/partition-report/0"
    return json.dumps(broken).encode()


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_corrupt_cache_entry_is_deleted_and_recomputed(rejects, tmp_path, how):
    first = analyze(rejects, PartitionOptions(backends=("htp",)))
    [entry] = [p for p in (tmp_path / "cache" / "partitions").glob("*.json") if p.name != "digests.json"]
    entry.write_bytes(corrupt(json.loads(entry.read_text()), how))
    again = analyze(rejects, PartitionOptions(backends=("htp",)))
    assert not again.cached  # detected: measured afresh, not served, and no traceback
    assert again.classes.to_json() == first.classes.to_json()
    assert PartitionReport.from_json(json.loads(entry.read_text())).digest == first.digest  # rewritten whole
    assert analyze(rejects, PartitionOptions(backends=("htp",))).cached


def test_a_corrupt_digest_index_is_ignored_and_rewritten(rejects, tmp_path):
    analyze(rejects, PartitionOptions(backends=("htp",)))
    index = tmp_path / "cache" / "partitions" / "digests.json"
    index.write_text(json.dumps({"files": {str(rejects): {"stamp": "x", "digest": 7}}}))
    again = analyze(rejects, PartitionOptions(backends=("htp",)))  # hashes the file again, while measuring
    assert json.loads(index.read_text())["files"][str(rejects)]["digest"] == again.digest
    assert analyze(rejects, PartitionOptions(backends=("htp",))).cached  # found through the rewritten index


def test_worker_crash_is_a_status_with_a_suggestion_and_is_not_cached(rejects):
    for _ in range(2):
        report = analyze(rejects, PartitionOptions(), worker_argv=CRASHING_WORKER, timeout=120)
        assert not report.cached
        for backend in ("htp", "gpu"):
            status = report.backends[backend]
            assert status.status == "failed"
            assert "killed by SIGSEGV" in status.error
            assert "crashed" in status.suggestion
        assert report.classes.note and report.plans == {}


def test_worker_hang_is_stopped_by_the_timeout(rejects):
    events = []
    report = analyze(rejects, PartitionOptions(backends=("htp",)), worker_argv=HANGING_WORKER, timeout=5,
                     on_event=events.append)
    assert Stage("compiling", 0.5) in events  # progress flowed before the hang
    htp = report.backends["htp"]
    assert htp.status == "failed" and "did not finish" in htp.error and "--timeout" in htp.suggestion


def test_device_report_replaces_the_prediction(rejects, tmp_path):
    local = analyze(rejects, PartitionOptions())
    assert local.backends["gpu"].status == "predicted"
    device = local.to_json()  # what `partition --out` writes; here edited as a device would measure it
    gpu = device["backends"]["gpu"]
    gpu["status"], gpu["source"] = "measured", "onnxruntime-qnn on a Snapdragon X Elite"
    for name, verdict in gpu["nodes"].items():
        verdict["supported"] = name != "sig0"  # the device GPU takes Erf and Mod, refuses the Sigmoid
        verdict["reason"] = None if verdict["supported"] else "measured refusal"
    text = json.dumps(device)
    imported = analyze(rejects, PartitionOptions(), device_reports=[("device.json", text)])
    assert imported.backends["gpu"].status == "measured"
    assert "device report device.json" in imported.backends["gpu"].source
    assert imported.backends["htp"].status == "measured"  # local measurement kept
    assert set(imported.classes.gpu_only) == {"erf0", "mod0"}
    assert imported.classes.htp_only == ["sig0"]
    assert any("imported" in note for note in imported.notes)


def test_device_report_of_another_model_is_refused(rejects, tmp_path):
    other = pm.save(pm.named_chain_model(), tmp_path, "chain")
    report = analyze(other, PartitionOptions()).to_json()
    report["backends"]["gpu"]["status"] = "measured"
    with pytest.raises(UserError, match="another model"):
        analyze(rejects, PartitionOptions(), device_reports=[("chain.json", json.dumps(report))])
    with pytest.raises(UserError, match="not JSON"):
        analyze(rejects, PartitionOptions(), device_reports=[("bad.json", "{nope")])


def test_report_round_trips_through_json(rejects):
    report = analyze(rejects, PartitionOptions())
    again = PartitionReport.from_json(json.loads(json.dumps(report.to_json())))
    assert again.to_json() == report.to_json()


def test_bad_options_are_user_errors():
    with pytest.raises(UserError, match="unknown backend"):
        PartitionOptions(backends=("npu",))
    with pytest.raises(UserError, match="positive integer"):
        PartitionOptions(dims={"batch": 0})
    with pytest.raises(UserError, match="unknown SoC"):
        PartitionOptions(soc="sm0000")
    with pytest.raises(UserError, match="NAME=VALUE"):
        parse_assignments(["batch"], "--dim", integer=True)
    assert PartitionOptions(fp16=True).soc == "sc8380xp"
    assert PartitionOptions(soc="57").soc == "sm8650"
