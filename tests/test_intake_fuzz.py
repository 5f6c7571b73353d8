"""Seeded fuzzing of model intake: byte mutations of the bundled samples and an invalid UTF-8 byte
in every string of them. Each file must end in a result or in one error line, never a traceback:
in-process, ``load_model``, both classifiers and the Overview's counts either return or raise
``UserError`` with a one-line message; a handful also go through the real CLI (exit 0 or 2, at
most one ``error:`` line on stderr).

A failure prints the seed, the case number and the mutations, so it can be replayed.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.errors import UserError
from dashboard.intake.reader import load_model
from dashboard.intake.samples import SAMPLES, sample_path
from dashboard.intake.wire import Field, split_message

ROOT = Path(__file__).resolve().parent.parent
SEED = 20260601
MUTATIONS = 1200
CLI_CASES = 8
MARK = "\u00a7q"  # a marker no sample uses: set into one string, then its first byte is made invalid


def _control_flow_model() -> onnx.ModelProto:
    """Strings where the samples have none: an If with a Loop inside, a Constant, a sparse
    initializer, a function, metadata and dimension names."""
    vi = helper.make_tensor_value_info
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Add", ["state_in", "step"], ["state_out"], name="accumulate")],
        "loop_body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                      vi("state_in", TensorProto.FLOAT, ["n"])],
        [vi("cond_out", TensorProto.BOOL, []), vi("state_out", TensorProto.FLOAT, ["n"])],
        [numpy_helper.from_array(np.ones(1, np.float32), "step")])
    then_branch = helper.make_graph(
        [helper.make_node("Loop", ["trip", "", "x"], ["looped"], name="loop", body=loop_body)],
        "then_branch", [], [vi("looped", TensorProto.FLOAT, ["n"])])
    else_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["zeros"], name="zeros", value=numpy_helper.from_array(
            np.zeros(4, np.float32), "zeros_value"))], "else_branch", [], [vi("zeros", TensorProto.FLOAT, [4])])
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.ones(2, np.float32), "sparse_values"),
                                       numpy_helper.from_array(np.array([0, 3], np.int64), "sparse_indices"), [4])
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["branch"], name="choose", then_branch=then_branch, else_branch=else_branch),
         helper.make_node("Double", ["branch"], ["y"], name="double", domain="local.functions")],
        "control_flow", [vi("flag", TensorProto.BOOL, []), vi("trip", TensorProto.INT64, []),
                         vi("x", TensorProto.FLOAT, ["n"])], [vi("y", TensorProto.FLOAT, ["n"])],
        sparse_initializer=[sparse])
    double = helper.make_function("local.functions", "Double", ["a"], ["b"],
                                  [helper.make_node("Add", ["a", "a"], ["b"], name="twice")],
                                  [helper.make_opsetid("", 17)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("local.functions", 1)],
                              functions=[double], producer_name="fuzz", producer_version="1")
    helper.set_model_props(model, {"author": "tests"})
    return model


@pytest.fixture(scope="module")
def corpus() -> dict[str, bytes]:
    files = {s.file_name: sample_path(s.file_name).read_bytes() for s in SAMPLES}
    files["control_flow.onnx"] = _control_flow_model().SerializeToString()
    return files


def _check(path: Path) -> tuple[str, str | None]:
    """("read", None) when the file is read and classified, ("refused", None) when it is refused
    in one line, else ("escaped", what went wrong)."""
    try:
        graph = load_model(path)
        classify_ep(graph)
        classify_refined(graph)
        sum(len(body.graph.nodes) for body in graph.bodies)  # the Overview's counts decode every body
    except UserError as exc:
        message = str(exc)
        if message.strip() and "\n" not in message:
            return "refused", None
        return "escaped", f"UserError not one line: {message!r}"
    except Exception:  # noqa: BLE001 - the point of the test: nothing else may escape
        return "escaped", traceback.format_exc(limit=-4)
    return "read", None


def _weight_payloads(data: bytes) -> list[tuple[int, int]]:
    """Where the top-level initializers' data sits (found with the reader's own wire scanner): most
    of a sample's bytes, and the least interesting place to mutate."""
    top = [p for p in split_message(data, 0, len(data), frozenset({7}), len(data)) if isinstance(p, Field)]
    spans = []
    for graph in top:
        for init in split_message(data, graph.value_start, graph.end, frozenset({5}), len(data)):
            if isinstance(init, Field):
                spans += [(f.value_start, f.end) for f in split_message(data, init.value_start, init.end,
                                                                          frozenset({9}), len(data))
                          if isinstance(f, Field)]
    return spans


def _position(rng: random.Random, size: int, payloads: list[tuple[int, int]]) -> int:
    """A byte to mutate: three times in four outside the weight payloads."""
    while True:
        at = rng.randrange(size)
        if rng.random() < 0.25 or not any(start <= at < end for start, end in payloads):
            return at


def _mutate(rng: random.Random, data: bytes) -> tuple[bytes, list[str]]:
    """One to three mutations, mostly of the graph's structure rather than its weights: random or
    boundary bytes, bit flips, inserted or deleted bytes, a duplicated span, a truncation."""
    out = bytearray(data)
    payloads = _weight_payloads(data)
    done = []
    for _ in range(rng.randint(1, 3)):
        if not out:
            break
        at = _position(rng, len(out), payloads)
        kind = rng.choice(["byte", "bit", "boundary", "insert", "delete", "duplicate", "truncate"])
        if kind == "byte":
            out[at] = rng.randrange(256)
        elif kind == "bit":
            out[at] ^= 1 << rng.randrange(8)
        elif kind == "boundary":
            out[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
        elif kind == "insert":
            out[at:at] = bytes([rng.randrange(256)])
        elif kind == "delete":
            del out[at]
        elif kind == "duplicate":
            span = out[at:at + rng.randint(1, 64)]
            out[at:at] = span
        else:
            del out[at:]
        done.append(f"{kind}@{at}")
    return bytes(out), done


def test_byte_mutations_end_in_a_result_or_one_error_line(corpus, tmp_path):
    rng = random.Random(SEED)
    names = sorted(corpus)
    path = tmp_path / "mutant.onnx"
    outcomes = {"read": 0, "refused": 0}
    failures = []
    for case in range(MUTATIONS):
        name = names[case % len(names)]
        data, mutations = _mutate(rng, corpus[name])
        path.write_bytes(data)
        outcome, problem = _check(path)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if problem:
            failures.append(f"seed {SEED} case {case} {name} {mutations}:\n{problem}")
    assert not failures, f"{len(failures)} of {MUTATIONS} mutants escaped:\n" + "\n".join(failures[:5])
    assert outcomes["read"] > 100 and outcomes["refused"] > 100, outcomes  # both paths were exercised


def _string_fields(message):
    """(parent message, field name, index or None) of every string field, at any depth."""
    for field, value in message.ListFields():
        items = list(value) if field.is_repeated else [value]
        for i, item in enumerate(items):
            index = i if field.is_repeated else None
            if field.type == field.TYPE_STRING:
                yield message, field.name, index
            elif field.type == field.TYPE_MESSAGE:
                yield from _string_fields(item)


def _with_invalid_utf8(data: bytes):
    """``data`` once per string field (``_string_fields`` order), with that field made invalid
    UTF-8: a marker is set into it, the model serialized, the marker's first byte replaced by 0xFF
    (so every length stays valid), and the field restored."""
    model = onnx.ModelProto.FromString(data)
    encoded = MARK.encode()
    for parent, name, index in list(_string_fields(model)):
        container = getattr(parent, name)
        value = container if index is None else container[index]
        if index is None:
            setattr(parent, name, MARK + value)
        else:
            container[index] = MARK + value
        out = model.SerializeToString()
        if index is None:
            setattr(parent, name, value)
        else:
            container[index] = value
        assert out.count(encoded) == 1
        yield out.replace(encoded, b"\xff" + encoded[1:])


def test_invalid_utf8_in_every_string_is_one_error_line(corpus, tmp_path):
    path = tmp_path / "bad_text.onnx"
    failures, refused = [], 0
    for name, data in sorted(corpus.items()):
        for number, mutant in enumerate(_with_invalid_utf8(data)):
            path.write_bytes(mutant)
            outcome, problem = _check(path)
            if problem:
                failures.append(f"{name} string #{number}:\n{problem}")
            elif outcome == "read":
                failures.append(f"{name} string #{number}: read, not refused")
            refused += outcome == "refused"
    assert not failures, f"{len(failures)} escaped:\n" + "\n".join(failures[:5])
    assert refused > 2000


def test_mutants_through_the_cli_exit_0_or_2_with_one_error_line(corpus, tmp_path):
    rng = random.Random(SEED + 1)
    paths = []
    for case in range(CLI_CASES):
        data, _ = _mutate(rng, corpus["llm_decoder_kv.onnx"] if case % 2 else corpus["control_flow.onnx"])
        paths.append(tmp_path / f"mutant_{case}.onnx")
        paths[-1].write_bytes(data)
    paths.append(tmp_path / "bad_text.onnx")
    paths[-1].write_bytes(next(itertools.islice(_with_invalid_utf8(corpus["cnn_classifier.onnx"]), 3, None)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "dashboard", "classify", str(p)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for p in paths]
    codes = []
    for path, proc in zip(paths, procs):
        out, err = proc.communicate(timeout=120)
        codes.append(proc.returncode)
        assert proc.returncode in (0, 2), (path.name, err)
        assert "Traceback" not in out + err, (path.name, err)
        errors = [line for line in err.splitlines() if not line.startswith("warning: ")]
        if proc.returncode == 2:
            assert len(errors) == 1 and errors[0].startswith("error: ") and path.name in errors[0], err
        else:
            assert not errors, err
    assert codes[-1] == 2
