"""The device doctor and the SoC table.

On this x86_64 host the doctor runs for real in a worker and must say "HTP simulator". The
checks of a Snapdragon board are run on hosts described with real files: a FastRPC node, a
``/sys/devices/soc0`` and a wheel folder with or without the skel, in temporary folders. The
emulated arm64 board (``tests/test_board.py``) runs the same checks on a real aarch64 userland.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from test_devices_ssh import free_port

from dashboard.errors import UserError
from dashboard.runtime import doctor
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.devices import Device
from dashboard.runtime.doctor import Host, diagnose, report_lines
from dashboard.runtime.protocol import DoctorReport
from dashboard.runtime.socs import SOCS, identify_soc, resolve_soc

ROOT = Path(__file__).resolve().parent.parent
SKELS = (68, 69, 73, 75, 79, 81)  # what the manylinux_2_34_aarch64 wheel of onnxruntime-qnn 2.7.0 ships


def wheel_folder(tmp_path: Path, archs=SKELS) -> Path:
    folder = tmp_path / "onnxruntime_qnn"
    folder.mkdir()
    for arch in archs:
        (folder / f"libQnnHtpV{arch}Skel.so").write_bytes(b"\x7fELF")
    (folder / "libQnnHtp.so").write_bytes(b"\x7fELF")
    return folder


def board(tmp_path: Path, *, machine: str | None = "QCS6490", fastrpc: bool = True, libraries=("cdsprpc", "OpenCL"),
          env=None, archs=SKELS, libc=("glibc", "2.36"), python=(3, 11, 2)) -> Host:
    """An aarch64 Linux board as the doctor sees it, made of real files under ``tmp_path``."""
    node = tmp_path / "fastrpc-cdsp"
    if fastrpc:
        node.write_bytes(b"")
    soc0 = tmp_path / "soc0"
    soc0.mkdir()
    if machine:
        (soc0 / "machine").write_text(machine + "\n")
        (soc0 / "soc_id").write_text("497\n")
    opencl = tmp_path / "usr" / "lib" / "libOpenCL.so"
    if "OpenCL" in libraries:
        opencl.parent.mkdir(parents=True)
        opencl.write_bytes(b"\x7fELF")
    found = {name: f"/usr/lib/lib{name}.so" for name in libraries}
    return Host(system="Linux", machine="aarch64", python=python, libc=libc, env=env or {},
                wheel_dir=wheel_folder(tmp_path, archs), wheel_version="2.7.0", fastrpc_node=node, soc0=soc0,
                find_library=found.get, opencl_paths=(opencl,))


def by_name(report: DoctorReport) -> dict:
    return {c.name: c for c in report.checks}


def test_a_healthy_board_passes_every_check(tmp_path):
    report = diagnose(board(tmp_path))
    checks = by_name(report)
    assert report.mode == "device"
    assert {n: c.status for n, c in checks.items()} == {
        "python": "pass", "glibc": "pass", "wheel": "pass", "fastrpc": "pass", "cdsprpc": "pass",
        "adsp_library_path": "pass", "opencl": "pass", "soc": "pass", "skel": "pass"}
    assert "Hexagon V68" in checks["soc"].detail and "QCS6490" in checks["soc"].detail
    assert report.summary == "HTP: no blocker found · GPU: no blocker found · CPU: no blocker found"


def test_a_board_without_a_dsp_explains_each_failure_with_a_fix(tmp_path):
    report = diagnose(board(tmp_path, fastrpc=False, libraries=()))
    checks = by_name(report)
    for name in ("fastrpc", "cdsprpc", "opencl"):
        assert checks[name].status == "fail" and checks[name].fix, name
    assert "does not exist" in checks["fastrpc"].detail and "exposes no NPU device" in checks["fastrpc"].detail
    assert checks["cdsprpc"].detail == "libcdsprpc.so is not found by the dynamic loader"
    assert checks["opencl"].backends == ["gpu"]
    assert report.summary.startswith("HTP fails: ")
    assert f"GPU fails: libOpenCL.so is not in {tmp_path / 'usr' / 'lib'}" in report.summary
    assert report.summary.endswith("CPU: no blocker found")
    lines = report_lines(report)
    assert any(line.startswith("  FAIL  ") and "/fastrpc-cdsp" in line for line in lines)
    assert sum(line.strip().startswith("fix: ") for line in lines) == 3


def test_a_versioned_library_without_its_plain_name_is_a_warning(tmp_path):
    host = board(tmp_path)
    host.find_library = {"cdsprpc": "libcdsprpc.so.1"}.get
    check = by_name(diagnose(host))["cdsprpc"]
    assert check.status == "warn" and "symlink" in check.fix


@pytest.mark.parametrize("value, ok", [("/vendor/dsp", False), ("{wheel};/vendor/dsp", True)])
def test_adsp_library_path_must_lead_to_the_wheels_skels(tmp_path, value, ok):
    host = board(tmp_path)
    host.env = {"ADSP_LIBRARY_PATH": value.format(wheel=host.wheel_dir)}
    check = by_name(diagnose(host))["adsp_library_path"]
    assert check.status == ("pass" if ok else "fail")
    if not ok:
        assert "/vendor/dsp" in check.detail and "unset ADSP_LIBRARY_PATH" in check.fix


def test_old_glibc_bionic_and_old_python_fail_every_backend(tmp_path):
    for i, (libc, expected) in enumerate(((("glibc", "2.31"), "glibc 2.31 is older than 2.34"),
                                          (("", ""), "not glibc"))):
        (tmp_path / str(i)).mkdir()
        check = by_name(diagnose(board(tmp_path / str(i), libc=libc)))["glibc"]
        assert check.status == "fail" and expected in check.detail and check.backends == ["htp", "gpu", "cpu"]
    (tmp_path / "py").mkdir()
    report = diagnose(board(tmp_path / "py", python=(3, 10, 12)))
    assert by_name(report)["python"].detail == "Python 3.10.12 is older than 3.11"
    assert "CPU fails: Python 3.10.12" in report.summary


def test_the_skel_for_the_socs_hexagon_arch(tmp_path):
    missing = by_name(diagnose(board(tmp_path, archs=(73, 75))))["skel"]
    assert missing.status == "fail"
    assert missing.detail == "no skel for Hexagon V68 (QCS6490 (RB3 Gen 2, IoT)): the wheel ships V73, V75"
    (tmp_path / "unknown").mkdir()
    unknown = by_name(diagnose(board(tmp_path / "unknown", machine="SM8250")))
    assert unknown["soc"].status == "warn" and "SM8250" in unknown["soc"].detail
    assert unknown["skel"].status == "skip" and "V68, V69, V73, V75, V79, V81" in unknown["skel"].detail
    (tmp_path / "nosoc").mkdir()
    absent = by_name(diagnose(board(tmp_path / "nosoc", machine=None)))["soc"]
    assert absent.status == "warn" and "is absent" in absent.detail


def test_windows_on_snapdragon_reads_the_processor_name(tmp_path):
    host = Host(system="Windows", machine="aarch64", python=(3, 12, 4), libc=("", ""), env={},
                wheel_dir=wheel_folder(tmp_path, (68, 73, 81)), wheel_version="2.7.0",
                processor_name="Snapdragon(R) X Elite - X1E78100 - Qualcomm(R) Oryon(TM) CPU",
                find_library={"libcdsprpc": r"C:\Windows\System32\libcdsprpc.dll"}.get)
    report = diagnose(host)
    checks = by_name(report)
    assert report.mode == "device" and "fastrpc" not in checks and "glibc" not in checks
    assert checks["cdsprpc"].status == "pass" and "libcdsprpc.dll" in checks["cdsprpc"].detail
    assert checks["opencl"].status == "fail" and "OpenCL.dll" in checks["opencl"].detail
    assert checks["soc"].status == "pass" and "SC8380XP" in checks["soc"].detail
    assert checks["skel"].status == "pass"
    emulated = Host(system="Windows", machine="x86_64", python=(3, 12, 4), libc=("", ""), env={}, wheel_dir=None,
                    wheel_version=None, processor_name=host.processor_name)
    assert doctor.platform_mode(emulated) == "device"  # x64 Python on the ARM laptop: the arm64ec libraries


def test_platforms_without_a_wheel_are_said_to_be_unsupported():
    mac = Host(system="Darwin", machine="arm64", python=(3, 12, 0), libc=("", ""), env={}, wheel_dir=None,
               wheel_version=None)
    report = diagnose(mac)
    assert report.mode == "unsupported"
    assert by_name(report)["platform"].detail == "no onnxruntime-qnn wheel for Darwin arm64"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="this host is not x86_64")
def test_a_backend_failure_carries_the_doctors_reason():
    from dashboard.runtime.qnn import probe_backend

    gpu = probe_backend("gpu")
    assert not gpu.ok
    assert gpu.error.endswith("; the device doctor finds: no QNN GPU on an x86_64 host (it needs an Adreno GPU)")
    assert doctor.explain("htp") == ""  # the simulator: nothing blocks the HTP


def test_the_soc_table_names_a_source_for_every_part():
    keys = [s.key for s in SOCS]
    assert len(keys) == len(set(keys)) and all(s.source for s in SOCS)
    expected = {"sc8480xp": (88, 81), "sm8850": (87, 81), "qcs6490": (None, 68), "qcs8275": (82, 75),
                "qcs9075": (77, 73)}
    assert {k: (resolve_soc(k).soc_model, resolve_soc(k).htp_arch) for k in expected} == expected
    assert "none published" in resolve_soc("qcs6490").source
    assert resolve_soc("88").key == "sc8480xp" and resolve_soc("77").key == "qcs9100"
    with pytest.raises(UserError, match="unknown SoC"):
        resolve_soc("None")  # a part without a soc_model is not found by the word None
    assert identify_soc("QCS9075").key == "qcs9075" and identify_soc("SC8280XP").key == "sc8280x"
    assert identify_soc(processor_name="Snapdragon(R) X2 Elite Extreme - X2E94100 - Qualcomm(R) Oryon(TM) CPU"
                        ).key == "sc8480xp"
    assert identify_soc("SM8250") is None


def test_a_part_without_a_published_soc_model_compiles_by_arch_only():
    assert SessionConfig(soc="qcs6490").qnn_options() == {"backend_type": "htp", "htp_arch": "68"}
    with pytest.raises(UserError, match="none is published for QCS6490.*soc_model=N \\(⟨provider_options⟩\\)"):
        SessionConfig(soc="qcs6490", fp16=True).qnn_options()
    given = SessionConfig(soc="qcs6490", fp16=True, provider_options={"soc_model": "93"}).qnn_options()
    assert given["soc_model"] == "93" and given["enable_htp_fp16_precision"] == "1"


def test_devices_page_shows_the_doctor_next_to_the_probe():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).switch_page("pages/devices.py").run()
    at.button(key="doctor_local").click().run(timeout=300)
    assert not at.exception and not at.error
    report = at.session_state["device_doctor"]["local"]
    table = at.dataframe[-1].value
    assert list(table.columns) == ["", "check", "found", "fix"]
    assert len(table) == len(report.checks) and table["check"].iloc[0] == "Python >= 3.11 (every onnxruntime-qnn wheel)"
    if report.mode == "simulator":
        assert any("HTP simulator" in m.value for m in at.markdown)

    unreachable = Device.parse(f"ssh://nobody@127.0.0.1:{free_port()}?connect_timeout=5")
    at.session_state["devices"] = {"local": Device.parse("local"), unreachable.url: unreachable}
    at.run()
    at.button(key=f"doctor_{unreachable.url}").click().run(timeout=120)
    assert any("cannot reach" in e.value for e in at.error)
