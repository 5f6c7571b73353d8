"""Sweeps over attached devices (``--devices``): each device takes the cells of its own SoC, the
devices whose probe names no known part take the rest, a cell no device takes is a failed row,
and two devices on this machine (``local`` and ``local?python=...``, the HTP simulator) share a
sweep's partition cells in parallel. The emulated arm64 board's run is in tests/test_board.py."""

from __future__ import annotations

import json
import sys
import threading

from sweep_helpers import write_models, write_spec

from dashboard.cli.main import main
from dashboard.runtime.devices import Device, DeviceProbe
from dashboard.sweep.device_exec import Attached, DevicesExecutor, device_soc
from dashboard.sweep.spec import load_spec
from dashboard.sweep.store import Store, run_sweep

HOST = {"hostname": "board", "os": "Linux 6.1", "arch": "aarch64", "python": "3.11.2", "onnxruntime": "1.32.0",
        "onnxruntime_qnn": "2.7.0", "qnn_sdk": "2.40"}


def attached(folder, name: str, machine: str | None) -> Attached:
    """A device on this machine under its own interpreter name (a link to this Python), probed as
    a board of ``machine`` would be."""
    python = folder / f"python-{name}"
    python.symlink_to(sys.executable)
    url = f"local?python={python}"
    probe = DeviceProbe(**HOST, soc={"machine": machine} if machine else {}, device=url, label=url)
    return Attached(Device.parse(url), probe, device_soc(probe))


def fake_runner(seen: dict, lock: threading.Lock):
    """A runner that records which device got each cell (no worker: the assignment is the point)."""
    from dashboard.sweep.cells import CellResult

    def run_one(cell, cancel, device=None):
        with lock:
            seen[(cell.model, cell.soc)] = device.url
        return CellResult(cell=cell, status="ok")

    return run_one


def test_each_device_takes_its_own_socs_cells_and_the_unidentified_ones_take_the_rest(tmp_path):
    write_models(tmp_path / "models", 2)
    spec = load_spec(write_spec(tmp_path / "spec.toml", 'models = ["models/*.onnx"]\n'
                                'socs = ["sm8650", "qcs6490", "sc8380xp"]\nanalyses = ["classify"]\n'))
    phone = attached(tmp_path, "phone", "SM8650")
    board = attached(tmp_path, "board", "QCS6490")
    other = attached(tmp_path, "other", None)
    assert (phone.soc, board.soc, other.soc) == ("sm8650", "qcs6490", None)
    seen, lock = {}, threading.Lock()
    store = Store(tmp_path / "out", create=True)
    progress = run_sweep(spec, store, executor=DevicesExecutor([phone, board, other]), run_one=fake_runner(seen, lock))
    assert progress.done == progress.total == 6 and progress.failed == 0
    expected = {"sm8650": phone.device.url, "qcs6490": board.device.url, "sc8380xp": other.device.url}
    assert seen == {(model, soc): expected[soc] for model in ("models/model_000.onnx", "models/model_001.onnx")
                    for soc in expected}
    results = list(Store(tmp_path / "out").results())
    assert {(r.cell.soc, r.node, r.executor) for r in results} == {
        (soc, Device.parse(url).label, "devices") for soc, url in expected.items()}
    assert {r.host for r in results} == {"board"}  # the device's host name, from its probe


def test_a_cell_no_device_takes_is_a_failed_row_naming_the_devices(tmp_path):
    write_models(tmp_path / "models", 1)
    spec = load_spec(write_spec(tmp_path / "spec.toml", 'models = ["models/*.onnx"]\n'
                                'socs = ["sm8650", "sc8380xp"]\nanalyses = ["classify"]\n'))
    phone = attached(tmp_path, "phone", "SM8650")
    seen, lock = {}, threading.Lock()
    run_sweep(spec, Store(tmp_path / "out", create=True), executor=DevicesExecutor([phone]),
              run_one=fake_runner(seen, lock))
    results = {r.cell.soc: r for r in Store(tmp_path / "out").results()}
    assert results["sm8650"].ok and seen == {("models/model_000.onnx", "sm8650"): phone.device.url}
    failed = results["sc8380xp"]
    assert not failed.ok and "no attached device takes sc8380xp cells" in failed.reason
    assert phone.label in failed.reason and "SM8650".lower() in failed.reason


def test_two_devices_on_this_machine_share_the_partition_cells(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    write_models(tmp_path / "models", 3)
    spec = write_spec(tmp_path / "spec.toml", 'models = ["models/*.onnx"]\nsocs = ["sm8650", "sc8380xp"]\n'
                      'analyses = ["partition"]\n')
    devices = f"local,local?python={sys.executable}"
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--devices", devices, "--json"]) == 0
    out, err = capsys.readouterr()
    cells = json.loads(out)["cells"]
    assert len(cells) == 6 and {c["status"] for c in cells} == {"ok"}, cells
    assert {c["hardware"] for c in cells} == {"simulator"} and {c["htp_coverage"] for c in cells} == {1.0}
    labels = {Device.parse("local").label, Device.parse(f"local?python={sys.executable}").label}
    assert {c["node"] for c in cells} == labels  # both devices ran cells
    assert {c["executor"] for c in cells} == {"devices"}
    assert err.count("devices: ") >= 2 and "takes the cells of the SoCs no other device is" in err


def test_a_bad_or_repeated_device_is_one_error_line_before_anything_runs(tmp_path, capsys):
    write_models(tmp_path / "models", 1)
    spec = write_spec(tmp_path / "spec.toml", 'models = ["models/*.onnx"]\nsocs = ["sm8650"]\n')
    for devices, said in (("ssh://-oProxyCommand=x", "bad host"), ("local,local", "twice"),
                          (f"local?python={tmp_path / 'nothing'}", "not an executable file")):
        assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--devices", devices]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: --devices") and said in err[0], err
    assert not (tmp_path / "out").exists()
