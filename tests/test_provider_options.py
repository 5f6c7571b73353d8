"""QNN provider options: a key the EP does not know, or a value it would not use, is refused in one
line with what is valid, by the Python API, the CLI and the pages alike, before any process starts
(the EP itself ignores unknown keys and most bad values without a word)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import onnx
import pytest
from fake_workers import processes_with_env
from page_jobs import OPTION_AREAS, page_with_model

from dashboard.errors import UserError
from dashboard.intake.samples import build_cnn_classifier
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.qnn_options import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
BAD = "htp_performance_mode=notamode"
VALID_MODES = "one of burst, balanced, default, high_performance, high_power_saver, low_balanced"


@pytest.mark.parametrize("options, message", [
    ({"htp_performance_mode": "notamode"}, "htp_performance_mode='notamode' is not valid: one of burst, balanced"),
    ({"htp_performanc_mode": "burst"}, "unknown QNN provider option 'htp_performanc_mode' \\(did you mean "
                                       "htp_performance_mode\\?\\): the runtime would ignore it; known: backend_type"),
    ({"qnn_context_priority": "warp_speed"}, "one of low, normal_low, normal, normal_high, high"),
    ({"enable_htp_fp16_precision": "yes"}, "enable_htp_fp16_precision='yes' is not valid: one of 0, 1"),
    ({"htp_arch": "74"}, "one of 0, 68, 69, 73, 75, 79, 81"),
    ({"soc_model": "SM8650"}, "an integer >= 0 \\(a QNN soc_model number"),
    ({"vtcm_mb": "-4"}, "vtcm_mb='-4' is not valid: an integer >= 0"),
    ({"htp_graph_finalization_optimization_mode": "4"}, "one of 0, 1, 2, 3"),
    ({"profiling_file_path": "a\nb"}, "without control characters"),
    ({"backend_type": "htp", "backend_path": "libQnnHtp.so"}, "exclude each other"),
])
def test_a_provider_option_the_runtime_would_not_use_is_refused_in_one_line(options, message):
    with pytest.raises(UserError, match=message) as info:
        SessionConfig(provider_options=options)
    assert "\n" not in str(info.value)


def test_every_option_the_project_sets_is_valid():
    """The options the code itself passes (runtime config, partition trace, timeline profiling,
    shared memory) and values the EP accepts in other spellings."""
    from dashboard.runtime.socs import SOCS

    for soc in SOCS:
        options = SessionConfig(fp16=True, soc=soc.key, provider_options={} if soc.soc_model else {
            "soc_model": "60"}).qnn_options()  # a part with no published id takes the user's
        assert options["enable_htp_fp16_precision"] == "1" and options["htp_arch"] == str(soc.htp_arch)
    SessionConfig(backend="gpu", provider_options={
        "enable_framework_op_trace": "1", "framework_op_trace_dir": "/tmp/trace", "profiling_level": "basic",
        "profiling_file_path": "/tmp/p.csv", "enable_htp_shared_memory_allocator": "1",
        "htp_performance_mode": "Burst", "soc_model": "60,88", "htp_arch": "73,81", "vtcm_mb": "8",
        "qnn_context_priority": "high", "rpc_control_latency": "100"})


def test_options_are_checked_where_each_command_takes_them():
    from dashboard.partition.analysis import PartitionOptions
    from dashboard.timeline.model import TimelineOptions

    for make in (PartitionOptions, TimelineOptions):
        with pytest.raises(UserError, match="htp_performance_mode='fast'"):
            make(provider_options={"htp_performance_mode": "fast"})


def test_a_backend_path_replaces_the_backend_type():
    options = SessionConfig(provider_options={"backend_path": "libQnnHtp.so"}).qnn_options()
    assert options == {"backend_path": "libQnnHtp.so"}


def test_the_table_knows_every_key_of_the_installed_ep():
    """Each key is a string of the installed EP library: a key renamed or dropped by an upgrade
    fails here instead of being refused as unknown while valid (or accepted while ignored)."""
    import onnxruntime_qnn

    library = Path(onnxruntime_qnn.get_library_path()).read_bytes()
    missing = [key for key in OPTIONS if key.encode() + b"\0" not in library and b"\0" + key.encode() not in library]
    assert not missing


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("options") / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), path)
    return path


@pytest.mark.parametrize("command", ["partition", "timeline"])
def test_the_cli_refuses_a_bad_option_in_one_line_before_starting_a_worker(model, command, tmp_path):
    mark = uuid.uuid4().hex
    done = subprocess.run([sys.executable, "-m", "dashboard", command, str(model), "--option", BAD],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "QNN_LAB_TEST_MARK": mark, "QNN_LAB_CACHE": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr.startswith("error: QNN provider option htp_performance_mode='notamode' is not valid: "
                                  + VALID_MODES)
    assert done.stderr.count("\n") == 1
    assert processes_with_env("QNN_LAB_TEST_MARK", mark) == []


@pytest.mark.parametrize("name, area", OPTION_AREAS)
def test_the_pages_refuse_a_bad_option_with_the_valid_values(model, name, area, tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    at = page_with_model(name, model)
    next(t for t in at.text_area if t.label == area).set_value(BAD)
    if name == "partitions":  # its options are a form: they apply with Apply
        at.button(key="pt_apply").click()
    at.run()
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]  # markdown-escaped by views.safe
    assert any("htp_performance_mode='notamode' is not valid" in e and "sustained_high_performance" in e
               for e in errors), errors

