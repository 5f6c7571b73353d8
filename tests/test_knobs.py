"""One settings record (``runtime.knobs``): its table makes every flag and every widget, each bad
value is one error line, the CLI and a page build equal records, hints name settings by key and
each front end words them its own way, and the constants exist once."""

from __future__ import annotations

import argparse
import ast
import os
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import partition_models as pm
from dashboard.cli.common import Parser, SettingsArgs
from dashboard.cli.main import main
from dashboard.errors import UserError
from dashboard.intake.reader import load_model
from dashboard.partition.analysis import suggestion_for, worded
from dashboard.runtime import knobs
from dashboard.runtime.knobs import CLI, KNOBS, PAGE, Settings, ref, words

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory) -> Path:
    """Input ``x`` with a named symbolic dimension (``batch``), input ``z`` with an unnamed one."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu0"), helper.make_node("Relu", ["z"], ["w"], name="relu1")]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16]),
                                             helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16]),
                               helper.make_tensor_value_info("w", TensorProto.FLOAT, [None, 4])])
    path = tmp_path_factory.mktemp("knobs") / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


# -- the table ------------------------------------------------------------------------------------------------
def test_the_table_is_the_record():
    fields = [f.name for f in dataclasses.fields(Settings)]
    assert [k.key for k in KNOBS] == fields == list(Settings.KNOB_FIELDS)
    assert Settings().to_json() == json.loads(json.dumps({k.key: k.default for k in KNOBS}))
    for attribute in ("flag", "label", "help", "widget"):
        values = [getattr(k, attribute) for k in KNOBS]
        assert all(values) and len(set(values)) == len(values), attribute
    assert all(k.flag.startswith("--") and "--" not in k.label + k.help for k in KNOBS)


def test_the_table_makes_every_flag():
    parser = Parser(prog="test")
    group = SettingsArgs(analysis="partition")
    group.add_to(parser)
    flags = {option for action in parser._actions for option in action.option_strings}
    assert {k.flag for k in KNOBS} <= flags
    assert group.parse(parser.parse_args([])) == Settings(timeout=knobs.TIMEOUTS["partition"])


def _settings_page(path: str, values: dict) -> None:
    """A page drawing every knob of the table for the model at ``path``; the record it builds
    (or the error) lands in the session state."""
    import streamlit as st

    from dashboard.errors import UserError
    from dashboard.intake.reader import load_model
    from dashboard.runtime.knobs import KNOB
    from dashboard.views.settings import SettingsForm

    form = SettingsForm("kt", "s", load_model(path), analysis="partition")
    form.draw(*KNOB)
    try:
        st.session_state["built"] = form.settings().to_json()
    except UserError as exc:
        st.session_state["built"] = None
        st.error(str(exc))


def settings_page(path: Path):
    from streamlit.testing.v1 import AppTest

    return AppTest.from_function(_settings_page, args=(str(path), {}), default_timeout=60).run()


def test_the_table_makes_every_widget(two_inputs):
    at = settings_page(two_inputs)
    assert not at.exception and not at.error
    labels = {w.label for kind in ("multiselect", "toggle", "selectbox", "number_input", "text_area", "text_input")
              for w in getattr(at, kind)}
    headers = " ".join(m.value for m in at.markdown)
    for knob in KNOBS:
        assert any(label.startswith(knob.label) for label in labels) or f"**{knob.label}**" in headers, knob.key
    assert at.number_input(key="kt_dim_s_batch").value == 1 and at.text_input(key="kt_shape_s_z").value == "?, 4"
    assert at.session_state["built"] == Settings(timeout=knobs.TIMEOUTS["partition"], dims={"batch": 1}).to_json()


def test_the_cli_and_a_page_build_equal_records(two_inputs):
    argv = ["--backends", "htp", "--fp16", "--soc", "sm8650", "--optimization-level", "basic", "--dim", "batch=2",
            "--shape", "z=3,4", "--option", "htp_performance_mode=burst", "--timeout", "120"]
    parser = Parser(prog="test")
    group = SettingsArgs(analysis="partition")
    group.add_to(parser)
    from_cli = group.parse(parser.parse_args(argv))
    at = settings_page(two_inputs)
    at.multiselect(key="kt_backends_s").set_value(["htp"])
    at.toggle(key="kt_fp16_s").set_value(True)
    at.selectbox(key="kt_soc_s").set_value("sm8650")
    at.selectbox(key="kt_level_s").set_value("basic")
    at.number_input(key="kt_dim_s_batch").set_value(2)
    at.text_input(key="kt_shape_s_z").set_value("3, 4")
    at.text_area(key="kt_opts_s").set_value("htp_performance_mode=burst")
    at.number_input(key="kt_timeout_s").set_value(120)
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["built"] == from_cli.to_json()


# -- bad values ---------------------------------------------------------------------------------------------
BAD = {  # knob -> (its flag with a bad value, part of the one line the CLI prints)
    "backends": (["--backends", "npu"], "unknown backend npu"),
    "fp16": (["--fp16=yes"], "--fp16: ignored explicit argument"),
    "soc": (["--soc", "sm0000"], "unknown SoC 'sm0000'"),
    "optimization_level": (["--optimization-level", "turbo"], "invalid choice: 'turbo'"),
    "dims": (["--dim", "batch=0"], "--dim 'batch' must be positive"),
    "shapes": (["--shape", "z=1,two"], "every dimension must be a positive integer"),
    "provider_options": (["--option", "htp_performance_mode=notamode"], "htp_performance_mode='notamode' is not valid"),
    "timeout": (["--timeout", "-5"], "--timeout: must be a number of seconds"),
}


def test_every_knob_has_a_bad_value_here():
    assert set(BAD) == {k.key for k in KNOBS}


@pytest.mark.parametrize("key", list(BAD))
def test_a_bad_value_is_one_error_line_on_the_cli(key, two_inputs, tmp_path, capsys):
    """Through the ``report`` command, which parses the settings before it reads or runs anything."""
    flags, message = BAD[key]
    argv = ["report", str(two_inputs), "--out", str(tmp_path / "r.html"), "--no-timeline", *flags]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("key, value, message", [
    ("backends", ["npu"], "unknown backend npu"), ("fp16", "yes", "fp16 must be true or false"),
    ("soc", "sm0000", "unknown SoC"), ("optimization_level", "turbo", "unknown optimization level"),
    ("dims", {"batch": 0}, "must be a positive integer"), ("shapes", {"z": [1, 0]}, "must be a positive integer"),
    ("provider_options", {"htp_performance_mode": "notamode"}, "is not valid"), ("timeout", -5, "timeout must be"),
])
def test_a_bad_value_is_one_user_error_from_python_and_json(key, value, message):
    """As a notebook or a page passes it, and as JSON read back (a cache entry, a device report)."""
    with pytest.raises(UserError, match=message) as refused:
        Settings(**{key: value})
    with pytest.raises(UserError) as read:
        Settings.from_json({key: value})
    assert "\n" not in str(refused.value) + str(read.value)


def test_a_cross_check_names_the_knob_in_each_front_ends_words(two_inputs, capsys):
    """fp16 for a SoC with no published soc_model needs the user's: refused before anything runs."""
    with pytest.raises(UserError) as refused:
        Settings(fp16=True, soc="qcs6490")
    assert ref("provider_options") in str(refused.value)
    code = main(["timeline", str(two_inputs), "--fp16", "--soc", "qcs6490"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "(--option KEY=VALUE)" in err and "⟨" not in err
    at = settings_page(two_inputs)
    at.toggle(key="kt_fp16_s").set_value(True)
    at.selectbox(key="kt_soc_s").set_value("qcs6490")
    at.run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "option ‘Extra QNN provider options’" in errors[0] and "--" not in errors[0]


# -- hints by key -------------------------------------------------------------------------------------------
FAILURES = {  # a runtime failure -> the knobs its suggestion names
    "QNN_COMMON_ERROR_MEM_ALLOC at finalize": {"fp16"},
    "Node 'conv' in NHWC layout was not selected by the HTP": {"soc", "device"},
    "the worker was killed by signal 11": {"optimization_level", "dims", "soc"},
    "the worker did not finish within 60 s": {"timeout", "dims"},
    "[ShapeInferenceError] Cannot get shape of x": {"shapes", "dims"},
    "QNN backend failed to initialize": {"device"},
}


@pytest.mark.parametrize("error", list(FAILURES))
def test_the_same_failure_is_worded_by_each_front_end(error, tmp_path):
    graph = load_model(pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed"))
    hint = suggestion_for(error, Settings(), graph)
    named = set(re.findall(r"⟨([a-z0-9_]+)⟩", hint))
    assert named == FAILURES[error]
    cli, page = words(hint, CLI), words(hint, PAGE)
    for key in named:
        thing = knobs.KNOB.get(key) or knobs.TERMS[key]
        assert thing.cli_words in cli and thing.cli_words not in page
        assert f"option ‘{thing.label}’" in page
    assert "⟨" not in cli + page and not re.search(r"(?<![\w-])--[a-z]", page)


def test_a_report_is_kept_by_key_and_worded_for_each_front_end(tmp_path):
    """The analysis' notes and suggestions stay by key in the record (it is cached for every
    front end); ``worded`` spells them for one."""
    from dashboard.partition.report import NodeClasses, PartitionReport, failed

    hint = suggestion_for("Cannot get shape", Settings(), None)
    report = PartitionReport(model="m", digest="d", options=Settings(), classes=NodeClasses(), plans={},
                             backends={"htp": failed("htp", "x", hint)},
                             notes=[f"override with {ref('dims')}"])
    cli = worded(report, CLI)
    assert cli.backends["htp"].suggestion == "QNN needs static shapes: fix every symbolic dimension (--dim NAME=VALUE)."
    assert cli.notes == ["override with --dim NAME=VALUE"]
    assert worded(report, PAGE).notes == ["override with option ‘Symbolic dimensions’"]
    assert report.notes == [f"override with {ref('dims')}"]  # the record itself is unchanged
    assert PartitionReport.from_json(json.loads(json.dumps(report.to_json()))).options == Settings()


# -- one definition ------------------------------------------------------------------------------------------
def _defined_lists(tree: ast.Module):
    """String lists a module defines as a constant (``NAME = (...)`` at module level) or offers as
    argparse ``choices=``: where the backends and levels were copied before."""
    candidates = [node.value for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))]
    candidates += [kw.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                   for kw in node.keywords if kw.arg == "choices"]
    for value in candidates:
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and value.elts and \
                all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
            yield value.lineno, {e.value for e in value.elts}


def test_the_knobs_constants_exist_once():
    """No other module defines the backends or the optimisation levels (they drifted apart when
    three modules did), nor a parser of the settings' NAME=VALUE items."""
    backends, levels = set(knobs.SESSION_BACKENDS), set(knobs.OPTIMIZATION_LEVELS)
    offenders = []
    for path in (ROOT / "dashboard").rglob("*.py"):
        if path.name == "knobs.py":
            continue
        source = path.read_text(encoding="utf-8")
        for line, values in _defined_lists(ast.parse(source)):
            if (len(values) >= 2 and values <= backends) or len(values & levels) >= 2:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {sorted(values)}")
        if re.search(r"^def parse_assignments\b", source, re.M):
            offenders.append(f"{path.relative_to(ROOT)}: defines parse_assignments")
    assert not offenders


def test_the_table_loads_no_runtime():
    """The CLI builds its parser from the table before it starts the worker: importing it loads
    neither numpy, onnx nor onnxruntime."""
    code = ("import sys, dashboard.runtime.knobs, dashboard.cli.common; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'onnx', 'onnxruntime'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


# -- timelines take every setting ------------------------------------------------------------------------
def test_a_timeline_takes_input_shapes_and_the_optimization_level(tmp_path):
    """A model whose input has an unnamed dimension: the HTP refuses it as it is, and serves it
    once ``--shape`` declares the whole shape (in a copy every session of the run reads, the cached
    EPContext one included); the optimization level reaches every session the run builds."""
    from dashboard.timeline.model import TimelineOptions
    from dashboard.timeline.runner import Runner

    model = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    env = {"QNN_LAB_MODEL_STORE": str(tmp_path / "models"), "QNN_LAB_CONTEXT_STORE": str(tmp_path / "contexts"),
           "QNN_LAB_CACHE": str(tmp_path / "cache")}

    def timeline(*flags: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "dashboard", "timeline", str(model), "--strategies",
                               "target,cached", "--requests", "3", "--json", *flags], cwd=ROOT, capture_output=True,
                              text=True, timeout=600, env={**os.environ, **env})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def served(run: dict) -> dict:
        return {name: s["metrics"]["served"] for name, s in run["strategies"].items()}

    assert served(timeline()) == {"target": {}, "cached": {}}  # QNN claims nothing of [?, 16]
    shaped = timeline("--shape", "x=2,16", "--optimization-level", "basic")
    assert served(shaped) == {"target": {"htp": 3}, "cached": {"htp": 3}}
    assert shaped["options"]["shapes"] == {"x": [2, 16]} and shaped["options"]["optimization_level"] == "basic"
    runner = Runner(str(model), TimelineOptions(optimization_level="disabled", shapes={"x": (2, 16)}),
                    lambda event: None, tmp_path)
    assert {runner._config(b)[0].optimization_level for b in ("cpu", "htp")} == {"disabled"}


def test_the_partition_json_words_hints_as_flags(tmp_path, monkeypatch, capsys):
    """What a pipeline reads from ``partition --json`` names the command's flags, not the cache's keys."""
    from dashboard.cli import partition as cli_partition
    from dashboard.partition.report import NodeClasses, PartitionReport, failed

    report = PartitionReport(model="m.onnx", digest="d", options=Settings(), classes=NodeClasses(), plans={},
                             backends={"htp": failed("htp", "timed out", "raise ⟨timeout⟩ or lower ⟨dims⟩")})
    monkeypatch.setattr(cli_partition, "analyze_from_args", lambda args, quiet=False: report)
    out = tmp_path / "r.json"
    args = argparse.Namespace(json=True, out=str(out))
    assert cli_partition.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    for data in (printed, json.loads(out.read_text())):
        hint = data["backends"]["htp"]["suggestion"]
        assert "--timeout" in hint and "--dim" in hint and "⟨" not in hint


def test_the_page_says_what_changed_between_two_runs_in_words_not_python():
    """"Compared with the previous run" printed raw dicts (``dims: {'batch': 1} → {'batch': 2}``)."""
    from dashboard.views.settings import setting_changes

    old = {**Settings(dims={"batch": 1, "seq": 8}).result_json(), "device": "this machine"}
    new = {**Settings(dims={"batch": 2, "seq": 8}, fp16=True, shapes={"x": (1, 16)}).result_json(),
           "device": "this machine"}
    said = setting_changes(old, new)
    text = "; ".join(said)
    assert f"{knobs.KNOB['dims'].label}: batch 1 → 2" in said and "seq" not in text  # only the entry that changed
    assert f"{knobs.KNOB['fp16'].label}: off → on" in said and f"{knobs.KNOB['shapes'].label}: x not set → 1×16" in said
    assert not re.search(r"[{}\[\]']|True|False|None", text), text
    assert setting_changes(old, old) == []
