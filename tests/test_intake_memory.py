"""Bounded memory: the reader's caps (nodes, one string, structure bytes), refused in one line
before the memory is spent; the reader's memory per node; the memory-limited child that reads a
model from the browser first; the parsed-model cache bounded in bytes.

Peak memory is measured in a child process (``ru_maxrss`` of a wrapper's only child), never timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from onnx import TensorProto, helper

import hostile_models
from dashboard.errors import ModelError, UserError
from dashboard.intake import caps, memo, preflight
from dashboard.intake.reader import load_model

ROOT = Path(__file__).resolve().parent.parent
MEMORY_BOUND = 1 << 30  # the bound: a 2 M-node, 54 MB graph in well under 1 GB
CHILD_TIMEOUT = 600  # seconds; generous for a shared 2-core machine, never asserted on

# Runs ``python -m dashboard ARGS`` as its only child and prints its exit code, stderr and peak RSS.
_MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "dashboard", *sys.argv[1:]], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
print(json.dumps({"code": done.returncode, "stderr": done.stderr, "peak": peak}))
"""


def measured(*args: str, env: dict | None = None) -> dict:
    """Exit code, stderr and peak resident bytes of ``python -m dashboard ARGS``."""
    import os

    done = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=CHILD_TIMEOUT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def one_error_line(result: dict) -> str:
    lines = result["stderr"].strip().splitlines()
    assert result["code"] == 2 and len(lines) == 1 and lines[0].startswith("error: "), result["stderr"][-2000:]
    return lines[0]


@pytest.fixture(autouse=True)
def default_caps(monkeypatch):
    for variable in [c.env for c in caps.CAPS] + [preflight.READ_MEMORY_MB.env, memo.MODEL_CACHE_MB.env]:
        monkeypatch.delenv(variable, raising=False)


# -- the hostile models of the issue ----------------------------------------------------------------

def test_the_2m_node_chain_is_refused_by_the_node_cap_in_one_line_within_the_bound(tmp_path):
    path = hostile_models.relu_chain(tmp_path / "relu_2m.onnx", 2_000_000)
    assert path.stat().st_size > 50 << 20  # the 54 MB file
    result = measured("classify", str(path))
    line = one_error_line(result)
    assert "QNN_LAB_MAX_NODES" in line and f"{caps.MAX_NODES.default:,}" in line
    assert result["peak"] < MEMORY_BOUND  # before the caps: 3.8 GB


def test_the_1gb_string_attribute_is_refused_in_one_line_before_it_is_copied(tmp_path):
    path = hostile_models.huge_string_model(tmp_path / "string_1g.onnx", 1 << 30, sparse=True)
    result = measured("classify", str(path))
    line = one_error_line(result)
    assert "QNN_LAB_MAX_STRING_BYTES" in line and "1,073,741,824" in line
    assert result["peak"] < 256 << 20  # before the caps: 3.2 GB, three copies of the string


def test_a_chain_under_the_cap_classifies_in_about_a_kilobyte_a_node(tmp_path):
    """200,000 nodes: the peak was 414 MB before nodes were slotted and stopped holding protobuf's
    arena (1.9 KB a node over the interpreter's 45 MB); the bound here is 1.25 KB a node."""
    nodes = 200_000
    path = hostile_models.relu_chain(tmp_path / "relu.onnx", nodes)
    result = measured("classify", "--json", str(path))
    assert result["code"] == 0, result["stderr"][-2000:]
    assert result["peak"] < (100 << 20) + 1250 * nodes


# -- each cap, its environment variable, and its one line ---------------------------------------------

def test_the_node_cap_counts_the_top_level_graph_and_its_env_raises_it(tmp_path, monkeypatch):
    path = hostile_models.relu_chain(tmp_path / "relu.onnx", 1000)
    monkeypatch.setenv(caps.MAX_NODES.env, "999")
    with pytest.raises(ModelError, match=r"at least 1,000 nodes, over the limit of 999 \(QNN_LAB_MAX_NODES\)"):
        load_model(path)
    monkeypatch.setenv(caps.MAX_NODES.env, "1000")
    assert len(load_model(path).nodes) == 1000


def _branch(name: str, nodes: int):
    chain = [helper.make_node("Identity", [f"{name}{i}"], [f"{name}{i + 1}"]) for i in range(nodes)]
    chain.insert(0, helper.make_node("Identity", ["x"], [f"{name}0"]))
    return helper.make_graph(chain, name, [], [helper.make_tensor_value_info(f"{name}{nodes}", TensorProto.FLOAT, [1])])


def test_the_node_cap_counts_control_flow_bodies(tmp_path, monkeypatch):
    """One If at the top level, 20 nodes in each branch: 41 nodes in all."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("If", ["c"], ["y"], then_branch=_branch("t", 19), else_branch=_branch("e", 19))
    graph = helper.make_graph([node], "g", [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [1])],
                              [vi("y", TensorProto.FLOAT, [1])])
    path = tmp_path / "if.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    monkeypatch.setenv(caps.MAX_NODES.env, "40")
    with pytest.raises(ModelError, match=r"has 41 nodes, over the limit of 40 \(QNN_LAB_MAX_NODES\)"):
        load_model(path)
    monkeypatch.setenv(caps.MAX_NODES.env, "41")
    assert len(load_model(path).nodes) == 1


def test_the_string_cap_and_its_env(tmp_path, monkeypatch):
    path = hostile_models.huge_string_model(tmp_path / "string.onnx", 100_000)
    assert load_model(path).nodes[0].attributes["note"] == "a" * 100_000  # admitted by default
    monkeypatch.setenv(caps.MAX_STRING_BYTES.env, "99_999")
    with pytest.raises(ModelError, match=r"has 100,000 bytes in one string field, over the limit of 99,999 "
                                         r"\(QNN_LAB_MAX_STRING_BYTES\)"):
        load_model(path)


def test_the_structure_cap_and_its_env(tmp_path, monkeypatch):
    path = hostile_models.relu_chain(tmp_path / "relu.onnx", 1000)
    monkeypatch.setenv(caps.MAX_GRAPH_BYTES.env, "10000")
    with pytest.raises(ModelError, match=r"bytes of graph structure \(weights excluded\), over the limit of 10,000 "
                                         r"\(QNN_LAB_MAX_GRAPH_BYTES\)"):
        load_model(path)
    monkeypatch.setenv(caps.MAX_GRAPH_BYTES.env, str(path.stat().st_size))
    assert len(load_model(path).nodes) == 1000


@pytest.mark.parametrize("value", ["lots", "-5", "0", "1e6"])
def test_a_malformed_cap_setting_is_one_line_naming_it(tmp_path, monkeypatch, value):
    path = hostile_models.relu_chain(tmp_path / "relu.onnx", 10)
    monkeypatch.setenv(caps.MAX_NODES.env, value)
    with pytest.raises(UserError, match=r"^QNN_LAB_MAX_NODES must be a positive whole number"):
        load_model(path)


def test_the_cli_refuses_over_a_lowered_cap_with_exit_2(tmp_path):
    path = hostile_models.relu_chain(tmp_path / "relu.onnx", 100)
    line = one_error_line(measured("classify", str(path), env={caps.MAX_NODES.env: "50"}))
    assert "over the limit of 50 (QNN_LAB_MAX_NODES)" in line


# -- the memory-limited child ------------------------------------------------------------------------

def test_the_child_refuses_a_model_over_its_memory_limit_naming_it(tmp_path, monkeypatch):
    big = hostile_models.relu_chain(tmp_path / "relu.onnx", 300_000)  # about 350 MB to read
    small = hostile_models.relu_chain(tmp_path / "small.onnx", 100)
    monkeypatch.setenv(preflight.READ_MEMORY_MB.env, "200")
    preflight.check_in_child(small)  # the limit leaves room for an ordinary model
    with pytest.raises(ModelError, match=r"needs more than 200 MB to read; .*QNN_LAB_READ_MEMORY_MB=200"):
        preflight.check_in_child(big)


def test_the_child_passes_the_readers_own_line_on(tmp_path):
    path = tmp_path / "text.onnx"
    path.write_text("not a model at all\n")
    with pytest.raises(ModelError, match=r"is a text file, not an ONNX protobuf$"):
        preflight.check_in_child(path)


# -- the cache bounded in bytes ----------------------------------------------------------------------

def test_the_cache_evicts_the_least_recently_used_once_over_its_bytes():
    limit = [100]
    cache = memo.SizedCache(lambda: limit[0], len)
    made = []

    def make(value):
        return lambda: made.append(value) or value

    assert cache.get("a", make("a" * 40)) == "a" * 40
    cache.get("b", make("b" * 40))
    cache.get("a", make("never"))  # a hit: "a" is now the most recent
    cache.get("c", make("c" * 40))  # 120 bytes: "b", the least recent, goes
    assert cache.keys() == ["a", "c"] and cache.total_bytes() == 80 and "never" not in made
    cache.get("d", make("d" * 500))  # alone over the bound: kept, everything else goes
    assert cache.keys() == ["d"]
    limit[0] = 1000
    cache.get("b", make("b" * 40))
    assert cache.keys() == ["d", "b"] and made.count("b" * 40) == 2


def test_a_failed_make_stores_nothing():
    cache = memo.SizedCache(lambda: 100, len)
    with pytest.raises(ModelError):
        cache.get("x", lambda: (_ for _ in ()).throw(ModelError("bad")))
    assert cache.keys() == []


def test_a_graphs_estimate_grows_with_its_nodes(tmp_path):
    small = load_model(hostile_models.relu_chain(tmp_path / "a.onnx", 100))
    large = load_model(hostile_models.relu_chain(tmp_path / "b.onnx", 10_000))
    assert memo.graph_bytes(large) > 50 * memo.graph_bytes(small) > 0


def test_the_weight_free_structure_reader_keeps_the_caps(tmp_path, monkeypatch):
    from dashboard.intake.reader import load_structure

    path = hostile_models.relu_chain(tmp_path / "relu.onnx", 100)
    assert len(load_structure(path).graph.node) == 100
    monkeypatch.setenv(caps.MAX_NODES.env, "50")
    with pytest.raises(ModelError, match=r"over the limit of 50 \(QNN_LAB_MAX_NODES\)"):
        load_structure(path)


@pytest.mark.skipif(sys.platform == "win32", reason="no memory limit on Windows (documented)")
def test_limit_memory_makes_a_larger_allocation_fail_in_that_process_only():
    code = ("from dashboard import platform\n"
            "assert platform.limit_memory(300 << 20)\n"
            "try:\n    bytearray(600 << 20)\nexcept MemoryError:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=CHILD_TIMEOUT)
    assert done.stdout.strip() == "refused", done.stderr
    assert bytearray(64 << 20)  # this process is not limited
