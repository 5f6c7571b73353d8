"""The orchestrator: cache, worker crash and hang, device-report import, classes from both backends."""

from __future__ import annotations

import json
import threading

import onnx
import partition_models as pm
import pytest
from deadlines import DEADLINE, wait_until
from fake_workers import gone_within

from dashboard.errors import UserError
from dashboard.intake.samples import sample_path
from dashboard.partition.analysis import Cancellation, Cancelled, PartitionOptions, analyze
from dashboard.runtime.knobs import parse_assignments
from dashboard.partition.protocol import Stage
from dashboard.partition.report import PartitionReport

# Workers whose ``partition`` command crashes natively, reports progress and then hangs, or runs
# on a host whose GPU backend "initializes" (the probe says so; the session then cannot set up).
CRASHING_WORKER = ("import dashboard.runtime.protocol as m, dashboard.runtime.worker as w\n"
                   "m.COMMANDS['partition'] = m.COMMANDS['partition']._replace(handler='dashboard.runtime.worker:crash')\n"
                   "w.serve()")
HANGING_WORKER = ("import time, dashboard.runtime.protocol as m, dashboard.partition.protocol as p, "
                  "dashboard.runtime.worker as w\n"
                  "def hang(args, emit):\n"
                  "    emit(p.Stage('compiling', 0.5))\n"
                  "    time.sleep(600)\n"
                  "m.COMMANDS['partition'] = m.COMMANDS['partition']._replace(handler='__main__:hang')\nw.serve()")
GPU_PROBE_SAYS_YES = ("import dashboard.partition.measure as pm, dashboard.runtime.worker as w\n"
                      "pm.probe_gpu_cached = lambda: (True, None, 'now')\nw.serve()")


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


def test_worker_crash_is_a_status_with_a_suggestion_and_is_not_cached(rejects, tmp_path):
    for _ in range(2):
        report = analyze(rejects, PartitionOptions(), device=pm.worker_device(tmp_path, CRASHING_WORKER), timeout=120)
        assert not report.cached
        for backend in ("htp", "gpu"):
            status = report.backends[backend]
            assert status.status == "failed"
            assert "killed by SIGSEGV" in status.error
            assert "crashed" in status.suggestion
        assert report.classes.note and report.plans == {}


def test_worker_hang_is_stopped_by_the_timeout(rejects, tmp_path):
    events = []
    report = analyze(rejects, PartitionOptions(backends=("htp",)), device=pm.worker_device(tmp_path, HANGING_WORKER),
                     timeout=5, on_event=events.append)
    assert Stage("compiling", 0.5) in events  # progress flowed before the hang
    htp = report.backends["htp"]
    assert htp.status == "failed" and "did not finish" in htp.error and "⟨timeout⟩" in htp.suggestion


def test_cancel_stops_the_worker_at_once_and_caches_nothing(rejects, tmp_path):
    cancel, events, outcome = Cancellation(), [], {}

    def run():
        try:
            analyze(rejects, PartitionOptions(backends=("htp",)), device=pm.worker_device(tmp_path, HANGING_WORKER),
                    timeout=600, on_event=events.append, cancel=cancel)
        except Cancelled as exc:
            outcome["cancelled"] = str(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: Stage("compiling", 0.5) in events, "the worker reporting its compile")
    [pid] = cancel.pids
    cancel.cancel()
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive() and outcome == {"cancelled": "the analysis was cancelled"}
    assert gone_within(pid, DEADLINE)  # the worker is gone, not left compiling (it would hang ten minutes)
    assert not [p for p in (tmp_path / "cache" / "partitions").glob("*.json") if p.name != "digests.json"]


def test_a_backend_that_cannot_set_up_is_failed_with_qnns_reason(rejects, tmp_path):
    """On a host whose QNN backend does not set up, ONNX Runtime still builds the session and runs
    every node on the CPU EP. That is a failure with QNN's message, not "measured, 0 claimed"."""
    report = analyze(rejects, PartitionOptions(), device=pm.worker_device(tmp_path, GPU_PROBE_SAYS_YES), timeout=300)
    gpu = report.backends["gpu"]
    assert gpu.status == "failed" and not gpu.nodes
    assert "QNN_BACKEND_ERROR_CANNOT_INITIALIZE" in gpu.error and "does not initialize" in gpu.suggestion
    assert report.backends["htp"].status == "measured"


def test_a_backend_that_refuses_every_node_is_still_a_measurement(tmp_path):
    """Refusing every node is not failing to set up: the EP's reasons are the measurement."""
    report = analyze(pm.save(pm.erf_only_model(), tmp_path, "erf"), PartitionOptions(backends=("htp",)), timeout=300)
    htp = report.backends["htp"]
    assert htp.status == "measured" and htp.error is None
    assert {n: v.status for n, v in htp.nodes.items()} == {"erf0": "rejected", "erf1": "rejected"}
    assert all("Operators of type `Erf` are not supported" in v.reason for v in htp.nodes.values())


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


def test_gpu_prediction_does_not_depend_on_the_htp_options():
    """GPT-2 without a cache, all dimensions fixed: in float32 the HTP cannot finalize it, in fp16
    it can. The predicted GPU column is the same either way (it was 147 vs 25 of 505 nodes when it
    read the HTP's verdicts), and its shapes come from the graph ORT hands the EPs."""
    model = "tests/data/exports/hf_gpt2_no_cache.onnx"
    fp32 = analyze(model, PartitionOptions(fp16=False), timeout=600)
    fp16 = analyze(model, PartitionOptions(fp16=True, soc="sm8650"), timeout=600)
    assert fp32.backends["htp"].status == "failed" and fp16.backends["htp"].status == "measured"
    gpu32, gpu16 = fp32.backends["gpu"], fp16.backends["gpu"]
    assert gpu32.status == gpu16.status == "predicted"
    assert {n: v.to_json() for n, v in gpu32.nodes.items()} == {n: v.to_json() for n, v in gpu16.nodes.items()}
    claimed = sum(v.supported for v in gpu32.nodes.values())
    assert claimed >= sum(v.supported for v in fp16.backends["htp"].nodes.values())  # every node the HTP takes
    assert not any("Cannot get shape" in (v.reason or "") for v in gpu32.nodes.values())


def test_an_soc_whose_layout_transform_fails_gets_one_message_and_a_next_step():
    cnn = sample_path("cnn_classifier.onnx")
    report = analyze(cnn, PartitionOptions(backends=("htp", "gpu"), fp16=True, soc="sc8280x"), timeout=600)
    htp = report.backends["htp"]
    assert htp.status == "failed" and "NHWC" in htp.error  # the runtime's own message, kept for the record
    assert "choose another SoC" in htp.suggestion and "sc8280x" in htp.suggestion
    assert "NHWC" not in report.classes.note  # said once, not repeated under the classes


def test_a_missing_external_data_file_says_so(tmp_path):
    onnx.save(pm.dynamic_model(), tmp_path / "ext.onnx", save_as_external_data=True, location="ext.onnx.data",
              size_threshold=0)
    (tmp_path / "ext.onnx.data").unlink()
    with pytest.raises(UserError, match=r"external-data file 'ext.onnx.data' is missing"):
        analyze(tmp_path / "ext.onnx", PartitionOptions())


def test_input_shapes_are_checked_against_the_model(tmp_path):
    path = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    for shapes, message in [({"y": (1, 16)}, "no input 'y'"), ({"x": (1, 16, 1)}, "rank 2"),
                            ({"x": (1, 15)}, "fixed to 16")]:
        with pytest.raises(UserError, match=message):
            analyze(path, PartitionOptions(shapes=shapes))
    named = pm.save(pm.dynamic_model(), tmp_path, "named")
    with pytest.raises(UserError, match="set 'batch' to 2 instead"):
        analyze(named, PartitionOptions(shapes={"x": (2, 16)}))
    with pytest.raises(UserError, match="positive integer"):
        PartitionOptions(shapes={"x": (0, 16)})
