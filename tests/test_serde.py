"""The one serializer: records round-trip, and anything that is not exactly a record's shape is one
line that names the field, never a traceback."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest

from dashboard.partition.analysis import PartitionOptions, analyze
from dashboard.partition.report import BackendReport, NodeSupport, PartitionReport, parse_device_report
from dashboard.runtime.client import WorkerClient, WorkerProtocolError
from dashboard.runtime.protocol import PROTOCOL_VERSION
from dashboard.serde import Record, SchemaError, dump, load, loads


@dataclass
class Inner(Record):
    name: str
    shape: tuple[int | str | None, ...] | None = None


@dataclass
class Outer(Record):
    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ("count",)

    kind: Literal["a", "b"]
    items: list[Inner]
    by_name: dict[str, Inner] = field(default_factory=dict)
    value: float | int | str | None = None
    free: dict = field(default_factory=dict)
    pair: tuple[str, int | None] = ("x", None)

    @property
    def count(self) -> int:
        return len(self.items)


def sample() -> Outer:
    return Outer("a", [Inner("x", (1, "batch", None))], {"y": Inner("y")}, 3, {"k": [1, {"z": None}]}, ("p", 2))


def test_round_trip_keeps_types_and_writes_derived_fields():
    data = json.loads(json.dumps(sample().to_json()))
    assert data["count"] == 1 and data["items"][0]["shape"] == [1, "batch", None]
    back = Outer.from_json(data)
    assert back == sample()
    assert isinstance(back.value, int) and isinstance(back.items[0].shape, tuple)
    assert Outer.from_json({**data, "value": 2.5}).value == 2.5


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(kind="c"), r"\$\.kind: expected one of 'a', 'b', got str 'c'"),
    (lambda d: d.update(items=None), r"\$\.items: expected a list, got null"),
    (lambda d: d["items"][0].update(name=5), r"\$\.items\[0\]\.name: expected str, got int 5"),
    (lambda d: d["by_name"].update(y=[]), r"\$\.by_name\['y'\]: expected an object, got a list"),
    (lambda d: d.update(turbo=True), r"\$: unknown field\(s\) 'turbo'"),
    (lambda d: d.pop("kind"), r"\$: missing field 'kind'"),
    (lambda d: d.update(pair=["p"]), r"\$\.pair: expected 2 items, got 1"),
    (lambda d: d.update(value=[1]), r"\$\.value: matches none of its types"),
    (lambda d: d["items"][0].update(shape=[True]), r"shape\[0\]: matches none of its types"),
])
def test_a_wrong_shape_is_one_line_naming_the_field(change, message):
    data = sample().to_json()
    change(data)
    with pytest.raises(SchemaError, match=message) as info:
        Outer.from_json(data)
    assert "\n" not in str(info.value)


def test_booleans_are_not_numbers_and_nan_is_not_json():
    with pytest.raises(SchemaError, match="expected int, got bool"):
        load(int, True)
    assert dump({"x": math.nan}) == {"x": None}


@pytest.mark.parametrize("text", [b"[" * 100_000 + b"]" * 100_000, b"{\"a\": " * 50_000 + b"1" + b"}" * 50_000])
def test_hostile_nesting_is_refused_without_recursion_errors(text):
    with pytest.raises(SchemaError, match="nested too deeply|not JSON"):
        loads(Outer, text)
    deep = json.loads("[" * 200 + "]" * 200)
    with pytest.raises(SchemaError, match="nested too deeply"):
        Outer.from_json({**sample().to_json(), "free": {"x": deep}})


def test_record_checks_run_on_json_too():
    options = PartitionOptions(backends=("htp",)).to_json()
    with pytest.raises(SchemaError, match="unknown backend"):
        PartitionOptions.from_json({**options, "backends": ["npu"]})
    node = NodeSupport("Conv", True).to_json()
    with pytest.raises(SchemaError, match="status: expected one of"):
        NodeSupport.from_json({**node, "status": "maybe"})
    report = BackendReport("htp", "measured", nodes={"c": NodeSupport("Conv", True)})
    assert BackendReport.from_json(json.loads(json.dumps(report.to_json()))) == report


def test_device_report_of_another_shape_is_one_line():
    with pytest.raises(SchemaError, match=r"^phone\.json: expected an object, got a list$"):
        parse_device_report("[]", "phone.json")
    with pytest.raises(SchemaError, match=r"phone\.json: not JSON"):
        parse_device_report("{", "phone.json")
    with pytest.raises(SchemaError, match="missing field 'backends'"):
        parse_device_report(json.dumps({"model": "m", "digest": "d", "options": {}}), "phone.json")


FORGED = [sys.executable, "-c", f"""
import json, sys
print(json.dumps({{"hello": {{"protocol": {PROTOCOL_VERSION}, "pid": 1}}}}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({{"id": request["id"], "ok": True, "result": {{"backends": None}}}}), flush=True)
"""]


def test_a_forged_worker_reply_is_one_line_and_the_worker_is_stopped(tmp_path):
    from dashboard.runtime.protocol import ProbeArgs

    worker = WorkerClient(FORGED, label="forged worker").start()
    pid = worker.pid
    with pytest.raises(WorkerProtocolError, match=r"malformed message and was stopped: result: missing field"):
        worker.call("probe", ProbeArgs())
    assert worker.pid is None
    import os
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_forged_partition_reply_is_a_failed_status_not_a_key_error(tmp_path, monkeypatch):
    import partition_models as pm

    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    report = analyze(model, PartitionOptions(backends=("htp",)), device=pm.worker_device(tmp_path, FORGED[2]),
                     timeout=60)
    assert report.backends["htp"].status == "failed"
    assert "malformed message" in report.backends["htp"].error and "backends" in report.backends["htp"].error
    assert isinstance(report, PartitionReport)
