"""``python -m dashboard classify`` (and ``bench``) as real subprocesses: the JSON contract of
issue 2 item 5 key by key and type by type, the readable table, exit codes, and the imports the
command line must never pay for."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.intake.reader import load_model
from tests.zoo import ZOO, hostile_names, save

ROOT = Path(__file__).resolve().parent.parent
VERDICTS = {"GenAI", "NonGenAI", "Unknown"}
SIGNAL_KEYS = {"name", "weight", "fired", "value", "threshold", "evidence"}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dashboard", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli")
    for name in ("llm_gqa_int4", "bert_encoder", "vit", "mlp_tabular"):
        save(ZOO[name].build(), directory)
    save(hostile_names(), directory)
    return directory


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_signals(signals: list) -> None:
    assert isinstance(signals, list) and signals
    for sig in signals:
        assert SIGNAL_KEYS <= set(sig)
        assert isinstance(sig["name"], str) and sig["name"]
        assert is_number(sig["weight"])
        assert isinstance(sig["fired"], bool)
        for key in ("value", "threshold"):
            assert sig[key] is None or is_number(sig[key]) or isinstance(sig[key], str), (sig["name"], key)
        assert isinstance(sig["evidence"], list) and all(isinstance(e, str) for e in sig["evidence"])


@pytest.mark.parametrize("name, ep_verdict, refined_verdict", [
    ("llm_gqa_int4", "GenAI", "GenAI"), ("bert_encoder", "GenAI", "NonGenAI"), ("vit", "GenAI", "NonGenAI"),
    ("mlp_tabular", "Unknown", "NonGenAI")])
def test_json_contract(zoo_dir, name, ep_verdict, refined_verdict):
    path = zoo_dir / f"{name}.onnx"
    done = cli("classify", str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # exactly one JSON object on stdout
    assert {"model", "nodes", "ep", "refined", "disagreement"} <= set(data)
    assert data["model"] == str(path)
    assert isinstance(data["nodes"], int) and not isinstance(data["nodes"], bool)
    ep, refined = data["ep"], data["refined"]
    assert {"verdict", "backend", "genai_score", "non_genai_score", "early_exit", "signals"} <= set(ep)
    assert {"verdict", "backend", "signals"} <= set(refined)
    for result in (ep, refined):
        assert result["verdict"] in VERDICTS
        assert result["backend"] == ("gpu" if result["verdict"] == "GenAI" else "htp")
        check_signals(result["signals"])
    assert is_number(ep["genai_score"]) and is_number(ep["non_genai_score"])
    assert ep["early_exit"] is None or isinstance(ep["early_exit"], str)
    assert (ep["verdict"], refined["verdict"]) == (ep_verdict, refined_verdict)
    if ep_verdict == refined_verdict:
        assert data["disagreement"] is None
    else:
        assert isinstance(data["disagreement"], str) and data["disagreement"].startswith(f"EP rules say {ep_verdict}")

    # the process reports what the library computes on the same file
    model = load_model(path)
    assert data["nodes"] == len(model.nodes)
    in_process = classify_ep(model)
    assert (ep["genai_score"], ep["non_genai_score"], ep["early_exit"]) == (
        in_process.genai_score, in_process.non_genai_score, in_process.early_exit)
    assert [s["name"] for s in refined["signals"]] == [s.name for s in classify_refined(model).signals]
    # added fields: the refined verdict's margin, confidence and one-sentence explanation
    assert is_number(refined["margin"]) and refined["confidence"] in ("confident", "uncertain")
    assert refined["explanation"].startswith(refined_verdict)
    assert ep["margin"] is None and ep["confidence"] is None


def test_table_names_both_verdicts_and_the_disagreement(zoo_dir):
    done = cli("classify", str(zoo_dir / "bert_encoder.onnx"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "EP rules (backend_type=auto): GenAI -> backend gpu" in out
    assert "Refined: NonGenAI -> backend htp" in out
    assert "early exit: kv-cache input names" in out
    assert "Disagreement: EP rules say GenAI (backend gpu) because" in out
    assert "text_encoder" in out
    assert "why: NonGenAI (confident, margin 18): token ids 'input_ids'" in out  # its pooled output counts too


def test_table_says_when_both_agree(zoo_dir):
    done = cli("classify", str(zoo_dir / "llm_gqa_int4.onnx"))
    assert done.returncode == 0, done.stderr
    assert "Both agree: GenAI -> backend gpu." in done.stdout


def test_hostile_names_survive_as_json(zoo_dir):
    done = cli("classify", str(zoo_dir / "hostile.onnx"), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["nodes"] == 9


def test_table_prints_hostile_names_as_escapes(tmp_path):
    """An input named with a terminal sequence and a bidi override shows in the evidence as text:
    every line of the table is printable (nothing reaches the terminal as a control sequence)."""
    name = "\x1b[2J\u202eids"
    graph = helper.make_graph([helper.make_node("Relu", [name], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "hostile_input.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    done = cli("classify", str(path))
    assert done.returncode == 0, done.stderr
    assert all(line.isprintable() for line in done.stdout.splitlines())
    assert "\\x1b[2J\\u202eids" in done.stdout


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), (b"", "file is empty"), (b"\x08\x07\x12\xff\xff\xff", "not a valid ONNX file"),
    (b"PK\x03\x04rest-of-a-zip", "zip archive"), (b"{\"not\": \"onnx\"}", "text file")])
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "bad.onnx"
    if content is not None:
        path.write_bytes(content)
    for extra in ((), ("--json",)):
        done = cli("classify", str(path), *extra)
        assert done.returncode == 2
        assert done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
        assert "Traceback" not in done.stderr


def test_directory_and_usage_errors_exit_2(tmp_path):
    done = cli("classify", str(tmp_path))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "is a directory" in done.stderr
    usage = cli("classify")
    assert usage.returncode == 2 and usage.stderr.startswith("error: ")


def test_classify_never_imports_ui_or_runtime_packages(zoo_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "dashboard", "classify",
                           str(zoo_dir / "vit.onnx"), "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "google" in imported and "dashboard" in imported  # the probe sees real imports (protobuf's)
    assert not imported & {"streamlit", "pandas", "plotly", "onnxruntime", "onnxruntime_qnn", "netron"}
    assert not imported & {"onnx", "ml_dtypes"}  # the reader's own descriptor: a second of import saved


def test_bench_prints_the_ratios_measured_in_the_same_run():
    done = cli("bench", "--nodes", "300", "--weights-mb", "4", "--repeat", "1", timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in ("[1/5] generating a node-heavy decoder", "onnx.load", "load_model", "classify_refined",
                 "classify / onnx.load", "(load_model + classify) / onnx.load", "(EP GenAI, refined GenAI)"):
        assert text in out, text
    for graph in ("node-heavy", "weight-heavy"):  # both process ratios, wall and CPU (node-heavy twice more
        lines = [line for line in out.splitlines()  # when the environment does not cache bytecode)
                 if line.strip().startswith(graph) and "classify process" in line and "x  (no floor)" in line]
        assert len(lines) == (4 if graph == "node-heavy" and os.environ.get("PYTHONDONTWRITEBYTECODE") else 2), out


def test_bench_rejects_nonsense_sizes():
    done = cli("bench", "--nodes", "3")
    assert done.returncode == 2 and done.stderr.startswith("error: ")


@pytest.mark.parametrize("raised, line, code", [
    (KeyboardInterrupt(), "error: interrupted", 130),
    ("terminated", "error: terminated by SIGTERM", 143),
    ("user", "error: bad input", 2),
])
def test_an_error_line_starts_on_a_line_of_its_own(raised, line, code, monkeypatch, capsys):
    """Ctrl-C (or a signal, or bad input found late) can land while a progress line is half
    written: the error is still one line of its own, and a finished line gets no blank one."""
    import importlib

    from dashboard.errors import UserError
    from dashboard.platform import Terminated

    cli_main = importlib.import_module("dashboard.cli.main")
    error = {"terminated": Terminated("SIGTERM"), "user": UserError("bad input")}.get(raised, raised)
    for written, expected in (("[ 40%] compiling", f"[ 40%] compiling\n{line}\n"), ("done\n", f"done\n{line}\n")):
        def run(args, written=written):
            sys.stderr.write(written)
            raise error

        class Parsed:
            def parse_args(self, argv, run=run):
                return argparse.Namespace(run=run)

        monkeypatch.setattr(cli_main, "build_parser", lambda argv: Parsed())
        assert cli_main.main(["classify", "m.onnx"]) == code
        assert capsys.readouterr().err == expected
