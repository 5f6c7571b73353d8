"""Issue 17 item 13: a copy-paste Python snippet that builds an analysis' session outside the dashboard.

The fast tests read the snippet's constants back with ``ast`` and compare them with what the
analysis hands the worker and the worker gives the session (both intercepted, no session made);
the last one runs the snippet in a fresh interpreter on the HTP simulator.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import partition_models as pm
import pytest

from dashboard.cli.main import main
from dashboard.errors import UserError
from dashboard.partition import analysis, measure, session
from dashboard.partition.snippet import model_snippet, report_snippet
from dashboard.runtime import qnn
from dashboard.runtime.knobs import Settings
from deadlines import DEADLINE

TRACE_KEYS = {"enable_framework_op_trace", "framework_op_trace_dir"}  # the worker's, to read reasons: left out


def constants(code: str) -> dict:
    """The snippet's top-level ``NAME = literal`` assignments (it must be valid Python)."""
    tree = ast.parse(code)
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.isupper()}


def worker_session(path, settings: Settings, monkeypatch, tmp_path):
    """The ``SessionConfig`` the worker's ``session.measured`` would create the HTP session with, for an
    analysis of ``path`` under ``settings``: what ``analyze`` sends, through what the worker adds."""
    sent = {}

    def run_worker(device, located, digest, args, *rest):
        sent["args"] = args
        raise UserError("intercepted")

    monkeypatch.setattr(analysis, "_run_worker", run_worker)
    with pytest.raises(UserError, match="intercepted"):
        analysis.analyze(path, settings, use_cache=False)
    args = sent["args"]
    made = {}

    def create_session(model, config, require_qnn=False):
        made["config"] = config
        raise UserError("intercepted")

    monkeypatch.setattr(qnn, "create_session", create_session)
    prepared = measure.prepare(str(path), dict(args.input_shapes))
    with pytest.raises(UserError):
        session.measured(prepared.session_input, prepared.session_config, args.config.replace(backend="htp"),
                         str(tmp_path))
    return made["config"]


def test_the_snippets_options_are_the_ones_the_worker_uses(monkeypatch, tmp_path):
    path = pm.save(pm.dynamic_model(), tmp_path, "dyn")
    settings = Settings(fp16=True, soc="sm8650", dims={"batch": 2}, optimization_level="basic",
                        provider_options={"htp_performance_mode": "burst"})
    config = worker_session(path, settings, monkeypatch, tmp_path)
    code = model_snippet(str(path), settings)
    found = constants(code)
    assert found["PROVIDER_OPTIONS"] == {k: v for k, v in config.qnn_options().items() if k not in TRACE_KEYS}
    assert found["PROVIDER_OPTIONS"]["htp_performance_mode"] == "burst"
    assert found["FREE_DIMENSIONS"] == config.dims == {"batch": 2}
    assert "GraphOptimizationLevel.ORT_ENABLE_BASIC" in code and config.optimization_level == "basic"
    for key, value in config.session_config.items():  # the assignment record, and nothing else here
        assert f"add_session_config_entry({key!r}, {value!r})" in code


def test_whole_input_shapes_are_declared_in_a_copy_as_the_worker_does(monkeypatch, tmp_path):
    path = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    settings = Settings(shapes={"x": (3, 16)})
    config = worker_session(path, settings, monkeypatch, tmp_path)
    code = model_snippet(str(path), settings)
    assert constants(code)["INPUT_SHAPES"] == {"x": [3, 16]}
    assert qnn.EXTERNAL_DATA_FOLDER in config.session_config and repr(qnn.EXTERNAL_DATA_FOLDER) in code
    assert "source = model.SerializeToString()" in code


def test_strings_from_the_model_are_literals_not_code(tmp_path):
    folder = tmp_path / "it's \"odd\"\\ \n'; import os; os.remove('x') #"
    folder.mkdir()
    path = pm.save(pm.named_chain_model(), folder, "chain")
    code = model_snippet(str(path), Settings())
    assert constants(code)["MODEL"] == str(path.resolve())
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "remove"]
    assert not calls


def test_the_cli_prints_the_snippet_without_analysing(monkeypatch, tmp_path, capsys):
    path = pm.save(pm.dynamic_model(), tmp_path, "dyn")
    monkeypatch.setattr(analysis, "analyze", lambda *a, **k: pytest.fail("--snippet must not analyse"))
    assert main(["partition", str(path), "--snippet", "--dim", "batch=4"]) == 0
    found = constants(capsys.readouterr().out)
    assert found["FREE_DIMENSIONS"] == {"batch": 4} and found["PROVIDER_OPTIONS"]["backend_type"] == "htp"
    assert main(["partition", str(path), "--snippet", "gpu"]) == 0
    assert constants(capsys.readouterr().out)["PROVIDER_OPTIONS"]["backend_type"] == "gpu"


def test_a_reports_snippet_uses_its_resolved_dimensions():
    class Report:
        model = "/m.onnx"
        options = Settings(fp16=False)
        dims = {"batch": 1, "seq": 128}

    assert constants(report_snippet(Report()))["FREE_DIMENSIONS"] == {"batch": 1, "seq": 128}


def test_the_snippet_creates_the_session_on_the_htp_simulator(tmp_path):
    path = pm.save(pm.named_chain_model(), tmp_path, "chain")
    script = tmp_path / "repro.py"
    script.write_text(model_snippet(str(path), Settings()), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=DEADLINE,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    qnn_lines = [line for line in done.stdout.splitlines() if line.startswith("QNNExecutionProvider")]
    # HTP claims all but erf0, in two QNN subgraphs (partition_models.named_chain_model)
    assert len(qnn_lines) == 2 and sum(int(line.split()[1]) for line in qnn_lines) == 4
    assert "erf0" not in " ".join(qnn_lines)


def test_the_page_shows_the_snippet_of_the_analysis():
    from streamlit.testing.v1 import AppTest
    from test_blockers import report

    def script(data):
        from dashboard.partition.report import PartitionReport
        from dashboard.views.partitions import _snippet

        _snippet(PartitionReport.from_json(data))

    at = AppTest.from_function(script, args=(report().to_json(),)).run()
    assert not at.exception
    code = at.code[0].value
    assert constants(code)["MODEL"] == "m.onnx" and "add_provider_for_devices" in code
    at.radio[0].set_value("gpu").run()
    assert constants(at.code[0].value)["PROVIDER_OPTIONS"]["backend_type"] == "gpu"
