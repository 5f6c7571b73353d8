"""Model intake (``dashboard.intake.reader``): structure, node attributes and subgraph bodies equal to
``onnx.load``, weights never read (initializers, and large tensors inside attributes and bodies),
no second read of the file after loading, external data confined to the model's folder, and every
kind of bad file refused with one clear line, in the library and through the real CLI."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.errors import ModelError
from dashboard.intake.graph import SMALL_TENSOR_BYTES, Node, SubGraph, TensorValue, dtype_name, stable_node_names
from dashboard.intake.reader import load_model
from tests import zoo

ROOT = Path(__file__).resolve().parent.parent
TORCH_FILES = sorted(zoo.TORCH_MODELS)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory) -> Path:
    """Every zoo model saved once for the module."""
    directory = tmp_path_factory.mktemp("zoo")
    for name, entry in zoo.ZOO.items():
        zoo.save(entry.build(), directory)
    zoo.save(zoo.hostile_names(), directory)
    zoo.save(zoo.custom_domain_model(), directory)
    return directory


def _shape(value_info: onnx.ValueInfoProto):
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        return None
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
                 for d in tensor.shape.dim)


def assert_same_tensor(ours: TensorValue, ref: onnx.TensorProto) -> None:
    """Header always; values exactly when the tensor is small and stored in the file."""
    assert isinstance(ours, TensorValue)
    assert (ours.name, ours.shape, ours.dtype) == (ref.name, tuple(ref.dims), dtype_name(ref.data_type))
    if ref.data_location == TensorProto.EXTERNAL:
        entries = {e.key: e.value for e in ref.external_data}
        assert (ours.external_location, ours.nbytes, ours.values) == (entries["location"], int(entries["length"]), None)
        return
    array = numpy_helper.to_array(ref)
    assert ours.external_location is None
    if ref.data_type != TensorProto.STRING:
        assert ours.nbytes == array.nbytes
    if array.nbytes <= SMALL_TENSOR_BYTES:
        assert ours.values is not None and ours.values.dtype == array.dtype and np.array_equal(ours.values, array)
    else:
        assert ours.values is None


def assert_same_attribute(ours, attr: onnx.AttributeProto) -> None:
    """``ours`` is the plain-Python form of ``attr`` (onnx.helper.get_attribute_value is the reference)."""
    ref = helper.get_attribute_value(attr)
    kind = attr.type
    if kind in (AttributeProto.TENSOR, AttributeProto.GRAPH):
        ours, ref = [ours], [ref]
    if kind in (AttributeProto.TENSOR, AttributeProto.TENSORS):
        assert len(ours) == len(ref)
        for mine, tensor in zip(ours, ref):
            assert_same_tensor(mine, tensor)
    elif kind in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
        assert len(ours) == len(ref)
        for mine, graph in zip(ours, ref):
            assert_same_graph(mine, graph)
    elif kind in (AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS):
        sparse = [ref] if kind == AttributeProto.SPARSE_TENSOR else list(ref)
        mine = [ours] if kind == AttributeProto.SPARSE_TENSOR else ours
        assert [(t.shape, t.dtype, t.values) for t in mine] == [
            (tuple(t.dims), dtype_name(t.values.data_type), None) for t in sparse]
    elif kind in (AttributeProto.TYPE_PROTO, AttributeProto.TYPE_PROTOS):
        types = [ref] if kind == AttributeProto.TYPE_PROTO else list(ref)
        mine = [ours] if kind == AttributeProto.TYPE_PROTO else ours
        assert [(t.elem_type, t.shape) for t in mine] == [
            (t.tensor_type.elem_type, _shape(helper.make_value_info("", t))) for t in types]
    elif kind == AttributeProto.STRING:
        assert ours == _text(ref)
    elif kind == AttributeProto.STRINGS:
        assert ours == [_text(v) for v in ref]
    else:  # float, int and their lists: the same numbers (float32 attributes widened alike)
        assert ours == ref and type(ours) is type(ref)


def _text(raw: bytes):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def assert_same_nodes(ours: list[Node], ref) -> None:
    """Nodes, their attributes (every value) and bodies equal the NodeProtos of ``onnx.load``."""
    assert [(n.onnx_name, n.op_type, n.domain, list(n.inputs), list(n.outputs)) for n in ours] == [
        (n.name, n.op_type, n.domain, list(n.input), list(n.output)) for n in ref]
    for node, proto in zip(ours, ref):
        assert list(node.attributes) == [a.name for a in proto.attribute], node.name
        for attr in proto.attribute:
            assert_same_attribute(node.attributes[attr.name], attr)
        graphs = [(a.name, list(a.graphs) if a.type == AttributeProto.GRAPHS else [a.g]) for a in proto.attribute
                  if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)]
        expected = {name + (f"[{k}]" if len(gs) > 1 else ""): g for name, gs in graphs for k, g in enumerate(gs)}
        assert list(node.bodies) == list(expected), node.name
        assert node.subgraphs == len(graphs)
        for key, graph in expected.items():
            assert_same_graph(node.bodies[key], graph)


def assert_same_graph(ours: SubGraph, ref: onnx.GraphProto) -> None:
    assert isinstance(ours, SubGraph) and ours.name == ref.name
    pairs = ((ours.inputs, ref.input), (ours.outputs, ref.output), (ours.value_info.values(), ref.value_info))
    for mine, theirs in pairs:
        assert [(t.name, t.elem_type, t.shape) for t in mine] == [
            (v.name, v.type.tensor_type.elem_type, _shape(v)) for v in theirs]
    assert list(ours.initializers) == [t.name for t in ref.initializer]
    for tensor in ref.initializer:
        init = ours.initializers[tensor.name]
        assert (init.shape, init.dtype, init.nbytes) == (
            tuple(tensor.dims), dtype_name(tensor.data_type), numpy_helper.to_array(tensor).nbytes)
    assert [n.name for n in ours.nodes] == stable_node_names([(n.name, n.op_type) for n in ref.node])
    assert_same_nodes(ours.nodes, ref.node)


def assert_same_structure(path: Path) -> None:
    """load_model(path) describes exactly what onnx.load(path) holds."""
    graph = load_model(path)
    model = onnx.load(str(path), load_external_data=False)
    ref = model.graph

    assert graph.ir_version == model.ir_version
    assert graph.opsets == {(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}
    assert graph.graph_name == ref.name
    assert [n.onnx_name for n in graph.nodes] == [n.name for n in ref.node]
    assert [n.op_type for n in graph.nodes] == [n.op_type for n in ref.node]
    assert [n.domain for n in graph.nodes] == [n.domain for n in ref.node]
    assert [list(n.inputs) for n in graph.nodes] == [list(n.input) for n in ref.node]
    assert [list(n.outputs) for n in graph.nodes] == [list(n.output) for n in ref.node]
    assert [n.subgraphs for n in graph.nodes] == [
        sum(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute) for n in ref.node]
    assert_same_nodes(graph.nodes, ref.node)
    assert [t.name for t in graph.listed_inputs] == [v.name for v in ref.input]
    assert [t.shape for t in graph.listed_inputs] == [_shape(v) for v in ref.input]
    assert [t.elem_type for t in graph.listed_inputs] == [v.type.tensor_type.elem_type for v in ref.input]
    assert [t.name for t in graph.outputs] == [v.name for v in ref.output]
    assert [t.shape for t in graph.outputs] == [_shape(v) for v in ref.output]
    assert {name: spec.shape for name, spec in graph.value_info.items()} == {v.name: _shape(v) for v in ref.value_info}

    assert list(graph.initializers) == [t.name for t in ref.initializer]
    for tensor in ref.initializer:
        init = graph.initializers[tensor.name]
        assert init.shape == tuple(tensor.dims), tensor.name
        assert init.dtype == dtype_name(tensor.data_type), tensor.name
        if tensor.data_location == TensorProto.EXTERNAL:
            entries = {e.key: e.value for e in tensor.external_data}
            assert init.external_location == entries["location"]
            assert init.nbytes == int(entries["length"])
        else:
            assert init.external_location is None
            assert init.nbytes == numpy_helper.to_array(tensor).nbytes, tensor.name
    assert len(graph.nodes) == len(graph.topo_order) == len(set(graph.topo_order))
    position = {index: i for i, index in enumerate(graph.topo_order)}
    producer = {out: n.index for n in graph.nodes for out in n.outputs if out}
    for node in graph.nodes:
        for name in node.inputs:
            if name in producer:
                assert position[producer[name]] < position[node.index], f"{node.name} before its input {name}"


@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_zoo_structure_matches_onnx_load(zoo_dir, name):
    assert_same_structure(zoo_dir / f"{name}.onnx")


@pytest.mark.parametrize("file_name", TORCH_FILES)
def test_torch_export_structure_matches_onnx_load(file_name):
    assert_same_structure(zoo.data_path(file_name))


def test_reversed_node_order_still_sorts_topologically(tmp_path):
    """Files need not list nodes in execution order; topo_order must still respect the edges."""
    model = zoo.ZOO["bert_encoder"].build()
    nodes = list(model.graph.node)[::-1]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    assert_same_structure(zoo.save(model, tmp_path))


def _every_attribute_type() -> onnx.ModelProto:
    """One custom-domain node holding every attribute type, graphs nested two deep."""
    vi = helper.make_tensor_value_info
    inner = helper.make_graph([helper.make_node("Neg", ["a"], ["b"], name="neg")], "inner",
                              [vi("a", TensorProto.FLOAT, [2])], [vi("b", TensorProto.FLOAT, [2])])

    def branch(name: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Add", ["x", f"{name}_bias"], ["t"]),
             helper.make_node("If", ["flag"], [f"{name}_out"], name="nested", then_branch=inner, else_branch=inner)],
            name, [], [vi(f"{name}_out", TensorProto.FLOAT, [2])],
            [numpy_helper.from_array(np.arange(2, dtype=np.float32), f"{name}_bias")],
            value_info=[vi("t", TensorProto.FLOAT, [2])])

    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "sv"),
                                       numpy_helper.from_array(np.array([0, 3], np.int64), "si"), [4])
    attributes = {
        "f": 0.1, "i": -3, "s": "causal", "s_binary": b"\xff\xfe", "floats": [1.5, 0.1], "ints": [1, -2, 3],
        "strings": ["a", "b\u00e9"], "t_int": numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "ti"),
        "t_bool": numpy_helper.from_array(np.tril(np.ones((4, 4), bool)), "mask"),
        "tensors": [numpy_helper.from_array(np.ones(3, np.float16), "h"),
                    numpy_helper.from_array(np.array(["x", "yz"], object), "names")],
        "g": branch("g"), "graphs": [branch("g0"), branch("g1")], "one_of_graphs": [branch("only")],
        "sparse": sparse, "sparses": [sparse, sparse],
        "tp": helper.make_tensor_type_proto(TensorProto.FLOAT, [2, "n"]),
        "tps": [helper.make_tensor_type_proto(TensorProto.INT64, None)],
    }
    node = helper.make_node("Everything", ["x", "flag"], ["y"], name="everything", domain="com.example.custom",
                            **attributes)
    node.attribute.append(helper.make_attribute("empty_ints", [], attr_type=AttributeProto.INTS))
    graph = helper.make_graph([node], "every_attribute",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.example.custom", 1)])


def test_every_attribute_type_matches_onnx_load(tmp_path):
    path = zoo.save(_every_attribute_type(), tmp_path)
    assert_same_structure(path)
    node = load_model(path).nodes[0]
    assert sorted(node.bodies) == ["g", "graphs[0]", "graphs[1]", "one_of_graphs"]
    assert node.bodies["g"] is node.attributes["g"]  # one decoded object, not two
    assert node.bodies["g"].nodes[1].bodies["then_branch"].nodes[0].op_type == "Neg"
    assert node.attributes["s_binary"] == b"\xff\xfe" and node.attributes["t_bool"].values.dtype == np.bool_


def test_attributes_decode_on_first_access_and_are_cached(tmp_path):
    node = load_model(zoo.save(_every_attribute_type(), tmp_path)).nodes[0]
    assert not node.decoded  # loading decodes nothing
    assert node.attributes is node.attributes and node.bodies is node.bodies


# weights are never read ------------------------------------------------------------------------

def _external_model(directory: Path, location: str = "weights.bin", model: onnx.ModelProto | None = None,
                    convert_attribute: bool = False) -> Path:
    """``model`` (default: the GPT-2 zoo decoder) with every initializer (and, if asked, every
    attribute tensor stored as raw data) in one external file."""
    model = model or zoo.ZOO["gpt2_kv_trilu"].build()
    path = directory / "decoder.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0, convert_attribute=convert_attribute)
    return path


def test_external_data_structure_matches_onnx_load(tmp_path):
    path = _external_model(tmp_path)
    graph = load_model(path)
    assert graph.external_bytes == graph.weight_bytes == (tmp_path / "weights.bin").stat().st_size
    assert path.stat().st_size < 64 * 1024  # the graph file itself holds no weights
    assert_same_structure(path)


def test_external_data_file_deleted_still_loads(tmp_path):
    path = _external_model(tmp_path)
    expected = load_model(path).initializers
    (tmp_path / "weights.bin").unlink()
    assert load_model(path).initializers == expected


def _run_guarded(func, fifos: list[Path], seconds: float = 20.0):
    """Run ``func`` in a thread. Opening a FIFO that has no writer blocks forever, so if ``func``
    is still running after ``seconds`` it opened one: release it and fail."""
    result: dict = {}

    def target():
        try:
            result["value"] = func()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: nobody is blocked on this one
                pass
        thread.join(5)
        pytest.fail(f"blocked opening a FIFO among {[str(f) for f in fifos]}: it read a file it must not")
    if "error" in result:
        raise result["error"]
    return result.get("value")


def test_external_data_fifo_is_never_opened(tmp_path):
    path = _external_model(tmp_path)
    (tmp_path / "weights.bin").unlink()
    os.mkfifo(tmp_path / "weights.bin")
    graph = _run_guarded(lambda: load_model(path), [tmp_path / "weights.bin"])
    assert graph.external_bytes > 0


def test_external_attribute_tensors_keep_their_header_and_are_never_opened(tmp_path):
    path = _external_model(tmp_path, model=onnx.load(zoo.data_path("torch_gpt2_kv.onnx")), convert_attribute=True)
    assert_same_structure(path)
    (tmp_path / "weights.bin").unlink()
    os.mkfifo(tmp_path / "weights.bin")

    def load_and_decode():
        graph = load_model(path)
        return [v for n in graph.nodes for v in n.attributes.values() if isinstance(v, TensorValue)]

    tensors = _run_guarded(load_and_decode, [tmp_path / "weights.bin"])
    assert len(tensors) > 10 and all(t.external_location == "weights.bin" and t.values is None for t in tensors)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# A message written in pieces: bytes, or an int for that many zero bytes left as a sparse hole, so
# a test file can hold hundreds of MB of "weights" that the test itself never has in memory.
Chunks = list


def _field(number: int, chunks: Chunks) -> Chunks:
    """Length-delimited field ``number`` holding ``chunks``."""
    size = sum(c if isinstance(c, int) else len(c) for c in chunks)
    return [_varint(number << 3 | 2) + _varint(size), *chunks]


def _write_chunks(path: Path, chunks: Chunks) -> None:
    with open(path, "wb") as handle:
        for chunk in chunks:
            if isinstance(chunk, int):
                handle.seek(chunk, os.SEEK_CUR)
            else:
                handle.write(chunk)
        handle.truncate()


def _big_tensor(name: str, rows: int, cols: int) -> Chunks:
    """A float [rows, cols] TensorProto whose raw_data (field 9) is a hole."""
    head = TensorProto(name=name, dims=[rows, cols], data_type=TensorProto.FLOAT).SerializeToString()
    return [head, *_field(9, [rows * cols * 4])]


def _write_model(path: Path, graph: Chunks) -> None:
    model = helper.make_model(onnx.GraphProto(), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.ClearField("graph")
    _write_chunks(path, [model.SerializeToString(), *_field(7, graph)])


def write_big_model(path: Path, rows: int, cols: int) -> int:
    """An MLP whose [rows, cols] float weight is embedded as raw_data."""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul")], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])])
    _write_model(path, [graph.SerializeToString(), *_field(5, _big_tensor("W", rows, cols))])  # 5: initializer
    return rows * cols * 4


def write_big_attribute_model(path: Path, rows: int, cols: int) -> int:
    """Three embedded [rows, cols] float tensors where weights are not expected: a top-level
    Constant's value, and inside a Loop body an initializer and another Constant."""
    vi = helper.make_tensor_value_info

    def constant(name: str, output: str) -> Chunks:
        attribute = AttributeProto(name="value", type=AttributeProto.TENSOR).SerializeToString()
        node = helper.make_node("Constant", [], [output], name=name).SerializeToString()
        return [node, *_field(5, [attribute, *_field(5, _big_tensor("", rows, cols))])]  # node.attribute / .t

    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
                              helper.make_node("Add", ["state_in", "body_w"], ["state_out"], name="add_weight")],
                             "body", [vi("iteration", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                                      vi("state_in", TensorProto.FLOAT, [rows, cols])],
                             [vi("cond_out", TensorProto.BOOL, []), vi("state_out", TensorProto.FLOAT, [rows, cols])])
    body_chunks = [body.SerializeToString(), *_field(1, constant("body_const", "body_table")),
                   *_field(5, _big_tensor("body_w", rows, cols))]
    loop = [helper.make_node("Loop", ["steps", "", "table"], ["looped"], name="loop").SerializeToString(),
            *_field(5, [AttributeProto(name="body", type=AttributeProto.GRAPH).SerializeToString(),
                        *_field(6, body_chunks)])]  # node.attribute / .g
    graph = helper.make_graph([], "big_attributes", [vi("steps", TensorProto.INT64, [])],
                              [vi("looped", TensorProto.FLOAT, [rows, cols])])
    _write_model(path, [graph.SerializeToString(), *_field(1, constant("big_const", "table")), *_field(1, loop)])
    return rows * cols * 4


PEAK_RSS = """
import sys
from dashboard.intake.reader import load_model
import onnx

def peak():  # VmHWM belongs to this process image; ru_maxrss would carry the forking parent's peak
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

def decode(nodes):  # every attribute and body, so lazy decoding is measured too
    for node in nodes:
        node.attributes
        for body in node.bodies.values():
            decode(body.nodes)

before = peak()
if sys.argv[2] == "load_model":
    decode(load_model(sys.argv[1]).nodes)
else:
    onnx.load(sys.argv[1])
after = peak()
print((after - before) * 1024)
"""


def _peak_growth(path: Path) -> dict[str, int]:
    """Peak-RSS growth of load_model (with every attribute decoded) and of onnx.load, each in its
    own process."""
    growth = {}
    procs = {how: subprocess.Popen([sys.executable, "-c", PEAK_RSS, str(path), how], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=_env())
             for how in ("load_model", "onnx.load")}
    for how, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        growth[how] = int(out.strip())
    return growth


def test_embedded_weights_are_not_read_into_memory(tmp_path):
    """A model with 128 MB of embedded weights: load_model's peak memory grows by a small fraction
    of that, while onnx.load (the control, same measurement) grows by at least the weight size."""
    path = tmp_path / "big.onnx"
    weight_bytes = write_big_model(path, 1024, 32768)
    graph = load_model(path)
    assert graph.initializers["W"].nbytes == weight_bytes and graph.nodes[0].op_type == "MatMul"

    growth = _peak_growth(path)
    assert growth["onnx.load"] >= weight_bytes  # the measurement does see a full read
    assert growth["load_model"] < weight_bytes / 8, growth


def test_large_tensors_in_attributes_and_bodies_are_not_materialized(tmp_path):
    """3 x 32 MB inside a Constant and a Loop body: headers are exact, no values, the kept
    NodeProtos hold no tensor data, and peak memory (attributes and bodies decoded) stays small
    while onnx.load's grows by all of it."""
    path = tmp_path / "big_attributes.onnx"
    weight_bytes = write_big_attribute_model(path, 1024, 8192)
    graph = load_model(path)
    const, loop = graph.node_by_name()["big_const"], graph.node_by_name()["loop"]
    header = ((1024, 8192), "float32", weight_bytes, None, None)
    value = const.attributes["value"]
    assert (value.shape, value.dtype, value.nbytes, value.external_location, value.values) == header
    body = loop.bodies["body"]
    body_w = body.initializers["body_w"]
    assert (body_w.shape, body_w.dtype, body_w.nbytes) == header[:3]
    inner = {n.name: n for n in body.nodes}["body_const"].attributes["value"]
    assert (inner.shape, inner.dtype, inner.nbytes, inner.external_location, inner.values) == header
    assert [n.name for n in body.nodes] == ["keep_going", "add_weight", "body_const"]
    assert const.proto.ByteSize() + loop.proto.ByteSize() < 4096

    growth = _peak_growth(path)
    assert growth["onnx.load"] >= 3 * weight_bytes
    assert growth["load_model"] < 3 * weight_bytes / 8, growth


def test_small_tensors_in_a_large_node_keep_their_values(tmp_path):
    """Stripping is per tensor: a Loop body over the limit (one large initializer) still carries
    its small Constant's values and its small initializer's header."""
    body_mask = np.tril(np.ones((8, 8), np.float32))
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Constant", [], ["mask"], name="mask", value=numpy_helper.from_array(body_mask)),
         helper.make_node("Add", ["state_in", "mask"], ["state_out"], name="add_mask")],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                 vi("state_in", TensorProto.FLOAT, [8, 8])],
        [vi("cond_out", TensorProto.BOOL, []), vi("state_out", TensorProto.FLOAT, [8, 8])],
        [numpy_helper.from_array(np.ones(2 * SMALL_TENSOR_BYTES // 4, np.float32), "large"),
         numpy_helper.from_array(np.ones(3, np.float32), "small")])
    loop = helper.make_node("Loop", ["steps", "", "x"], ["y"], name="loop", body=body)
    model = helper.make_model(helper.make_graph([loop], "g", [vi("steps", TensorProto.INT64, []),
                                                              vi("x", TensorProto.FLOAT, [8, 8])],
                                                [vi("y", TensorProto.FLOAT, [8, 8])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = zoo.save(model, tmp_path)
    assert_same_structure(path)  # values equal onnx.load's for the small tensors, None for the large one
    node = load_model(path).nodes[0]
    assert node.proto.ByteSize() < SMALL_TENSOR_BYTES
    assert np.array_equal(node.bodies["body"].nodes[1].attributes["value"].values, body_mask)


def test_classification_never_reads_the_file_again(zoo_dir, tmp_path):
    """Every zoo model and torch export, loaded, then its file replaced by a FIFO (opening it
    would block): classifying it gives exactly what it gave with the file in place, including the
    evidence that comes from attributes and subgraph bodies."""
    paths = [Path(shutil.copy(zoo_dir / f"{name}.onnx", tmp_path)) for name in zoo.ZOO]
    paths += [Path(shutil.copy(zoo.data_path(name), tmp_path)) for name in TORCH_FILES]

    def classify_all(graphs):
        return {p: (classify_ep(g).to_json(), classify_refined(g).to_json()) for p, g in graphs.items()}

    before = classify_all({p: load_model(p) for p in paths})
    graphs = {p: load_model(p) for p in paths}  # nothing decoded yet
    for p in paths:
        p.unlink()
        os.mkfifo(p)
    after = _run_guarded(lambda: classify_all(graphs), paths)
    assert after == before
    evidence = json.dumps(list(after.values()))
    for needed in ("unidirectional=1", "subgraph node(s) analysed", "is lower-triangular"):
        assert needed in evidence  # the lazily decoded details did matter


# external data must stay inside the model's folder ----------------------------------------------

def _model_with_external(directory: Path, location: str) -> Path:
    """A one-node model whose weight lives at ``location`` (written as given, unchecked)."""
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    set_external_data(weight, location=location, offset=0, length=64)
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "ext",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = directory / "model.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder next to the model's folder holding a FIFO 'secret.bin': reading it would block."""
    folder = tmp_path / "outside"
    folder.mkdir()
    os.mkfifo(folder / "secret.bin")
    return folder


def _assert_refused(path: Path, fifo: Path, location: str) -> None:
    with pytest.raises(ModelError) as info:
        _run_guarded(lambda: load_model(path), [fifo])
    message = str(info.value)
    assert "\n" not in message
    assert "'W'" in message and repr(location) in message and "refusing" in message


def test_absolute_external_location_refused(tmp_path, outside):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    location = str(outside / "secret.bin")
    _assert_refused(_model_with_external(model_dir, location), outside / "secret.bin", location)


def test_dotdot_external_location_refused(tmp_path, outside):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    location = "../outside/secret.bin"
    _assert_refused(_model_with_external(model_dir, location), outside / "secret.bin", location)


def test_dotdot_hidden_in_the_middle_refused(tmp_path, outside):
    model_dir = tmp_path / "model"
    (model_dir / "sub").mkdir(parents=True)
    location = "sub/../../outside/secret.bin"
    _assert_refused(_model_with_external(model_dir, location), outside / "secret.bin", location)


def test_symlinked_file_pointing_outside_refused(tmp_path, outside):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "weights.bin").symlink_to(outside / "secret.bin")
    _assert_refused(_model_with_external(model_dir, "weights.bin"), outside / "secret.bin", "weights.bin")


def test_symlinked_folder_pointing_outside_refused(tmp_path, outside):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "data").symlink_to(outside, target_is_directory=True)
    _assert_refused(_model_with_external(model_dir, "data/secret.bin"), outside / "secret.bin", "data/secret.bin")


@pytest.mark.parametrize("location", ["C:/Windows/secret.bin", "\\\\server\\share\\secret.bin", ""])
def test_other_non_relative_locations_refused(tmp_path, location):
    with pytest.raises(ModelError, match="refusing"):
        load_model(_model_with_external(tmp_path, location))


def test_external_location_in_a_symlink_loop_refused(tmp_path):
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    with pytest.raises(ModelError, match="symlink loop.*refusing") as info:
        load_model(_model_with_external(tmp_path, "loop_a"))
    assert "\n" not in str(info.value)


def test_inside_locations_accepted(tmp_path):
    """Not over-eager: a subfolder, or a ``..`` that stays inside, is fine (and still not read)."""
    (tmp_path / "sub").mkdir()
    assert load_model(_model_with_external(tmp_path, "sub/w.bin")).initializers["W"].external_location == "sub/w.bin"
    assert load_model(_model_with_external(tmp_path, "sub/../w.bin")).external_bytes == 64


def _external_tensor(name: str, location: str) -> TensorProto:
    tensor = numpy_helper.from_array(np.ones((4, 4), np.float32), name)
    set_external_data(tensor, location=location, offset=0, length=64)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    return tensor


def _one_node_model(node: onnx.NodeProto, output: str = "y", **graph_fields) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [4, 4]), vi("flag", TensorProto.BOOL, [])],
                              [vi(output, TensorProto.FLOAT, [4, 4])], **graph_fields)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _nested_external(kind: str, location: str) -> tuple[onnx.ModelProto, str]:
    """A model whose only external tensor sits at ``kind``; returns it and the words the refusal
    must name."""
    vi = helper.make_tensor_value_info
    if kind == "constant":
        node = helper.make_node("Constant", [], ["y"], name="secret", value=_external_tensor("c", location))
        return _one_node_model(node), "attribute 'value' of node 'secret'"
    if kind == "sparse values":
        sparse = helper.make_sparse_tensor(_external_tensor("sv", location),
                                           numpy_helper.from_array(np.array([0], np.int64), "si"), [16])
        return _one_node_model(helper.make_node("Identity", ["x"], ["y"], name="id"), sparse_initializer=[sparse]), \
            "sparse initializer 'sv'"
    if kind == "sparse indices":
        indices = _external_tensor("si", location)
        indices.data_type = TensorProto.INT64
        sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.ones(1, np.float32), "sv"), indices, [16])
        return _one_node_model(helper.make_node("Identity", ["x"], ["y"], name="id"), sparse_initializer=[sparse]), \
            "sparse initializer 'sv'"
    if kind == "body initializer, two deep":
        inner = helper.make_graph([helper.make_node("Add", ["x", "w"], ["z"], name="add")], "inner", [],
                                  [vi("z", TensorProto.FLOAT, [4, 4])], [_external_tensor("w", location)])
        then = helper.make_graph([helper.make_node("If", ["flag"], ["z"], name="inner_if", then_branch=inner,
                                                   else_branch=inner)], "then", [], [vi("z", TensorProto.FLOAT, [4, 4])])
        node = helper.make_node("If", ["flag"], ["y"], name="outer_if", then_branch=then, else_branch=then)
        return _one_node_model(node), ("initializer 'w' inside attribute 'else_branch' of node 'inner_if' "
                                        "inside attribute 'else_branch' of node 'outer_if'")
    if kind == "attribute of a typed-INT attribute":  # a tensor hidden behind a declared type that says otherwise
        node = helper.make_node("Identity", ["x"], ["y"], name="id")
        attribute = helper.make_attribute("alpha", 1)
        attribute.t.CopyFrom(_external_tensor("hidden", location))
        node.attribute.append(attribute)
        return _one_node_model(node), "attribute 'alpha' of node 'id'"
    assert kind == "function"
    function = helper.make_function("local", "Secret", [], ["out"], [helper.make_node(
        "Constant", [], ["out"], name="inside", value=_external_tensor("f", location))], [helper.make_opsetid("", 17)])
    model = _one_node_model(helper.make_node("Secret", [], ["y"], name="call", domain="local"))
    model.functions.append(function)
    model.opset_import.append(helper.make_opsetid("local", 1))
    return model, "attribute 'value' of node 'inside' in function 'Secret'"


NESTED_KINDS = ["constant", "sparse values", "sparse indices", "body initializer, two deep",
                "attribute of a typed-INT attribute", "function"]


@pytest.mark.parametrize("kind", NESTED_KINDS)
@pytest.mark.parametrize("location", ["/etc/passwd", "../outside/secret.bin"])
def test_external_location_refused_wherever_the_tensor_sits(tmp_path, outside, kind, location):
    """One rule for every tensor: a Constant, sparse values and indices, a body's initializer two
    bodies deep, a tensor behind a wrong declared type, a function's Constant (a FIFO stands in
    for the target: opening it would block)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    model, words = _nested_external(kind, location)
    path = zoo.save(model, model_dir)
    with pytest.raises(ModelError) as info:
        _run_guarded(lambda: load_model(path), [outside / "secret.bin"])
    message = str(info.value)
    assert "\n" not in message and words in message and repr(location) in message and "refusing" in message
    assert message.startswith(str(path))


@pytest.mark.parametrize("kind", NESTED_KINDS)
def test_nested_tensors_inside_the_folder_are_accepted(tmp_path, kind):
    model, _ = _nested_external(kind, "data/w.bin")
    load_model(zoo.save(model, tmp_path))


@pytest.mark.parametrize("location, reason", [("w\0.bin", "NUL byte"), ("sub/\0/../../x", "NUL byte"),
                                              (b"\xffw.bin", "not valid UTF-8")])
def test_nul_byte_and_invalid_utf8_locations_are_one_line(tmp_path, location, reason):
    """``embedded null byte`` used to escape as a ValueError with a traceback."""
    raw = location if isinstance(location, bytes) else location.encode()
    path = _model_with_external(tmp_path, "L" * len(raw))  # protobuf cannot write these: patch the bytes
    data = path.read_bytes()
    assert data.count(b"L" * len(raw)) == 1
    path.write_bytes(data.replace(b"L" * len(raw), raw))
    with pytest.raises(ModelError) as info:
        load_model(path)
    message = str(info.value)
    assert "\n" not in message and reason in message, message


def test_classify_cli_refuses_a_constant_reading_etc_passwd(tmp_path):
    model, _ = _nested_external("constant", "/etc/passwd")
    path = zoo.save(model, tmp_path)
    done = subprocess.run([sys.executable, "-m", "dashboard", "classify", str(path)], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()] and "'/etc/passwd'" in done.stderr


def test_invalid_utf8_producer_name_is_one_line(tmp_path):
    """Used to be ``TypeError: sequence item 0: expected str instance, bytes found``."""
    model = zoo.ZOO["mlp_tabular"].build()
    model.producer_name = "PRODUCER"
    path = tmp_path / "producer.onnx"
    path.write_bytes(model.SerializeToString().replace(b"PRODUCER", b"\xffRODUCER"))
    with pytest.raises(ModelError, match=r"producer_name is not valid UTF-8 \(b'\\xffRODUCER'\)"):
        load_model(path)


def test_errors_name_the_path_given_not_the_symlink_target(tmp_path):
    target = tmp_path / "store" / "blob-1234"
    target.parent.mkdir()
    target.write_bytes(b"PK\x03\x04" + bytes(64))
    link = tmp_path / "model.onnx"
    link.symlink_to(target)
    with pytest.raises(ModelError) as info:
        load_model(link)
    assert str(info.value).startswith(f"{link}: ") and "blob-1234" not in str(info.value)


# bad input: one clear line ---------------------------------------------------------------------

def _tiny_model_bytes() -> bytes:
    return zoo.ZOO["mlp_tabular"].build().SerializeToString()


def _png() -> bytes:
    return (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00\x00\x00\x01" * 2 + b"\x08\x02\x00\x00\x00"
            + b"\x90wS\xde" + b"\x00\x00\x00\x00IEND\xaeB`\x82")


def _zip(payload: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("model.onnx", payload)
    return buf.getvalue()


def _tar(payload: bytes, mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as archive:
        info = tarfile.TarInfo("model.onnx")
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


def _cyclic() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")],
        "cyclic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _dangling() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "missing_bias"], ["y"], name="add_bias")], "dangling",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _outputs(*names: str) -> bytes:
    """A Relu graph whose declared outputs are ``names`` (its node writes ``y``)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "outputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in names])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _negative_dims() -> bytes:
    """An Add whose weight declares dims [-5, 3] (no data: the header is what is wrong)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "negative",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-5, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _no_graph() -> bytes:
    model = helper.make_model(onnx.GraphProto(name="g"), opset_imports=[helper.make_opsetid("", 17)])
    model.ClearField("graph")
    return model.SerializeToString()


_MODEL = _tiny_model_bytes()

# name -> (file content, words the one-line message must contain)
BAD_FILES: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "empty": (b"", ("empty",)),
    "truncated_1": (_MODEL[:1], ("truncated",)),
    "truncated_10": (_MODEL[:10], ("truncated",)),
    "truncated_half": (_MODEL[: len(_MODEL) // 2], ("truncated",)),
    "truncated_last_byte": (_MODEL[:-1], ("truncated",)),
    "random_small": (np.random.default_rng(1).bytes(64), ("not",)),
    "random_4k": (np.random.default_rng(2).bytes(4096), ("not",)),
    "random_1m": (np.random.default_rng(3).bytes(1 << 20), ("not",)),
    "zeros": (bytes(1024), ("not",)),
    "png": (_png(), ("PNG",)),
    "text": (b"hello, this is a README\nnot a model\n", ("text file",)),
    "python_source": (b"import torch\n\nmodel = torch.load(\"m.pt\")  # \xc3\xa9t\xc3\xa9\n", ("text file",)),
    "json": (json.dumps({"model": "llama", "layers": 2}).encode(), ("JSON",)),
    "html": (b"<!doctype html><html><body>404</body></html>", ("HTML",)),
    "zip": (_zip(_MODEL), ("zip",)),
    "tar": (_tar(_MODEL), ("tar",)),
    "gzip": (gzip.compress(_MODEL, mtime=0), ("gzip",)),
    "tar_gz": (_tar(_MODEL, "w:gz"), ("gzip",)),
    "cyclic": (_cyclic(), ("cycle", "'first'") ),
    "dangling": (_dangling(), ("dangling", "'missing_bias'", "'add_bias'")),
    "no_graph": (_no_graph(), ("graph",)),
    "no_outputs": (_outputs(), ("declares no outputs",)),
    "negative_dims": (_negative_dims(), ("initializer 'w'", "negative dimension [-5, 3]")),
    "dangling_output": (_outputs("y", "z"), ("graph output 'z'", "dangling output")),
    "tensor_proto_file": (numpy_helper.from_array(np.ones((2, 3), np.float32), "input_0").SerializeToString(),
                          ("not",)),
}


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("bad")
    for name, (content, _) in BAD_FILES.items():
        (directory / f"{name}.onnx").write_bytes(content)
    (directory / "folder.onnx").mkdir()
    (directory / "folder.onnx" / "inner.onnx").write_bytes(_MODEL)
    return directory


BAD_PATHS = {**{name: (f"{name}.onnx", words) for name, (_, words) in BAD_FILES.items()},
             "directory": ("folder.onnx", ("directory", "inner.onnx")),
             "missing": ("does_not_exist.onnx", ("no such file",))}


@pytest.mark.parametrize("case", sorted(BAD_PATHS))
def test_bad_input_raises_model_error(bad_dir, case):
    file_name, words = BAD_PATHS[case]
    with pytest.raises(ModelError) as info:
        load_model(bad_dir / file_name)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    assert file_name in message
    for word in words:
        assert word.lower() in message.lower(), message


@pytest.fixture
def special_paths(tmp_path) -> dict[str, tuple[Path, str]]:
    """Paths that are not model files, each with the words its error must say: a FIFO (opening it
    would block forever), a device, a symlink loop, and names holding a newline or an escape."""
    loop = tmp_path / "loop.onnx"
    loop.symlink_to(tmp_path / "loop2.onnx")
    (tmp_path / "loop2.onnx").symlink_to(loop)
    paths = {"device": (Path(os.devnull), "not a regular file"),
             "symlink_loop": (loop, "cannot read it"),
             "newline_name": (_write(tmp_path / "a\nb.onnx", b"hello\n"), "text file"),
             "escape_name": (tmp_path / "\x1b]0;pwned\x07.onnx", "no such file")}
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.onnx")
        paths["fifo"] = (tmp_path / "fifo.onnx", "not a regular file")
    return paths


def test_special_paths_are_refused_without_opening_them(special_paths):
    fifos = [path for case, (path, _) in special_paths.items() if case == "fifo"]
    for path, words in special_paths.values():
        with pytest.raises(ModelError, match=words) as info:
            _run_guarded(lambda: load_model(path), fifos)  # a FIFO opened would block: the guard fails the test
        assert str(path) in str(info.value)


@pytest.mark.parametrize("command", ["classify", "partition", "timeline", "report"])
def test_cli_special_paths_are_one_printable_error_line(special_paths, command, tmp_path):
    """Every command: exit 2 and one ``error:`` line; the path shows with its newline and escape
    characters as escapes (a forged second line or a terminal sequence is impossible)."""
    extra = ["--out", str(tmp_path / "r.html")] if command == "report" else []
    procs = {case: subprocess.Popen([sys.executable, "-m", "dashboard", command, str(path), *extra],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
             for case, (path, _) in special_paths.items()}
    errors = {}
    for case, proc in procs.items():
        out, errors[case] = proc.communicate(timeout=120)
        err = errors[case]
        assert proc.returncode == 2 and out == "", (case, err)
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and special_paths[case][1] in err, (case, err)
        assert err[:-1].isprintable(), (case, err)
    assert "a\\nb.onnx" in errors["newline_name"] and "\\x1b]0;pwned\\x07.onnx" in errors["escape_name"]


def _deeply_nested_if(depth: int) -> bytes:
    """A model whose If nests ``depth`` bodies deep, written on the wire directly (protobuf's own
    serializer refuses past about 30). Deeper than ~20 levels, each body is over the size the
    reader strips tensors from, so the reader walks every level itself."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def field(number: int, payload: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def if_node(name: str, body: bytes, leaf: bytes) -> bytes:
        branch = lambda which, graph: field(5, field(1, which) + field(6, graph) + varint(20 << 3) + varint(5))  # noqa: E731
        return field(1, b"c") + field(2, b"y") + field(3, name.encode()) + field(4, b"If") + \
            branch(b"then_branch", body) + branch(b"else_branch", leaf)

    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "leaf", [], [y]).SerializeToString()
    body = leaf
    for level in range(depth):
        body = field(1, if_node(f"if{level}", body, leaf)) + field(2, f"b{level}".encode()) + field(12, y.SerializeToString())
    top = helper.make_model(helper.make_graph([], "top", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                                        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], [y]),
                            opset_imports=[helper.make_opsetid("", 17)])
    graph = field(1, if_node("top_if", body, leaf)) + top.graph.SerializeToString()
    top.ClearField("graph")
    return top.SerializeToString() + field(7, graph)


@pytest.mark.parametrize("depth", [60, 5000])
def test_bodies_nested_beyond_protobufs_limit_are_one_error_line(tmp_path, depth):
    """Past protobuf's depth limit, a model is invalid; thousands of levels deep, the reader's own
    walk ran out of stack and the mapping could not close (a BufferError traceback)."""
    path = _write(tmp_path / f"deep{depth}.onnx", _deeply_nested_if(depth))
    with pytest.raises(ModelError, match="not a valid ONNX file") as info:
        load_model(path)
    assert "\n" not in str(info.value)
    done = subprocess.run([sys.executable, "-m", "dashboard", "classify", str(path)], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1


def test_outputs_straight_from_an_input_or_an_initializer_are_accepted(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "passthrough",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("y", "x", "w")],
        [numpy_helper.from_array(np.ones(1, np.float32), "w")])
    path = _write(tmp_path / "passthrough.onnx",
                  helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert [o.name for o in load_model(path).outputs] == ["y", "x", "w"]


def test_every_truncation_of_a_model_is_refused(tmp_path):
    """Each strict prefix of a small model (a download cut short anywhere) is a ModelError."""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(np.zeros(3, np.float32), "unused")]),
        opset_imports=[helper.make_opsetid("", 17)], producer_name="tests", ir_version=8)
    data = model.SerializeToString()
    assert load_model(_write(tmp_path / "full.onnx", data)).nodes[0].name == "relu"
    path = tmp_path / "cut.onnx"
    for cut in range(1, len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(ModelError, match="truncated|no IR version or graph") as info:
            load_model(path)
        assert "\n" not in str(info.value)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# warnings, not errors ---------------------------------------------------------------------------

def test_unknown_domain_loads_with_warning(tmp_path):
    graph = load_model(zoo.save(zoo.custom_domain_model("com.example.custom"), tmp_path))
    assert [n.domain for n in graph.nodes][-1] == "com.example.custom"
    assert any("com.example.custom" in w for w in graph.warnings)


def test_future_opset_and_ir_load_with_warning(tmp_path):
    model = zoo.custom_domain_model(opset=onnx.defs.onnx_opset_version() + 5)
    model.ir_version = onnx.IR_VERSION + 3
    graph = load_model(zoo.save(model, tmp_path))
    assert graph.opsets[""] == onnx.defs.onnx_opset_version() + 5
    text = " ".join(graph.warnings)
    assert f"opset {onnx.defs.onnx_opset_version() + 5}" in text and f"IR version {onnx.IR_VERSION + 3}" in text
    assert len(graph.nodes) == 3


def test_known_model_has_no_warnings(tmp_path):
    assert load_model(zoo.save(zoo.ZOO["llm_gqa_int4"].build(), tmp_path)).warnings == []


# hostile node names -----------------------------------------------------------------------------

def test_hostile_names_load_unique_and_stable(tmp_path):
    path = zoo.save(zoo.hostile_names(), tmp_path)
    first, second = load_model(path), load_model(path)
    names = [n.name for n in first.nodes]
    assert names == [n.name for n in second.nodes]
    assert len(set(names)) == len(names) == len(zoo.HOSTILE_NAMES)
    assert [n.onnx_name for n in first.nodes] == zoo.HOSTILE_NAMES
    seen = set()
    for node, raw in zip(first.nodes, zoo.HOSTILE_NAMES):
        if raw and raw not in seen:
            assert node.name == raw  # a real name is kept verbatim (10k chars, HTML, non-ASCII)
        seen.add(raw)
    assert all(n.name for n in first.nodes)
    assert first.node_by_name()[zoo.HOSTILE_NAMES[0]].index == 0
    assert first.inputs[0].name == "<b>input</b>" and first.outputs[0].name == "out</td>"


@pytest.mark.parametrize("raw", [
    [("", "Relu"), ("Relu#0", "Relu")],
    [("a", "Add"), ("a", "Add"), ("a#1", "Add"), ("", "Add"), ("Add#3", "Mul")],
    [("", "X")] * 50,
    [("dup", "Y")] * 3 + [("dup#1", "Y"), ("dup#2'", "Y")],
])
def test_stable_node_names_unique_for_colliding_inputs(raw):
    names = stable_node_names(raw)
    assert len(set(names)) == len(raw)
    assert stable_node_names(raw) == names
    first_seen = {}
    for (name, _), shown in zip(raw, names):
        if name and name not in first_seen:
            first_seen[name] = shown
            assert shown == name


# the CLI, in real subprocesses ------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_results(bad_dir) -> dict[str, subprocess.CompletedProcess]:
    """``python -m dashboard classify`` on every bad path, all processes started at once."""
    procs = {case: subprocess.Popen([sys.executable, "-m", "dashboard", "classify", str(bad_dir / file_name)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                                    cwd=ROOT)
             for case, (file_name, _) in BAD_PATHS.items()}
    results = {}
    for case, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        results[case] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return results


@pytest.mark.parametrize("case", sorted(BAD_PATHS))
def test_cli_bad_input_one_error_line_exit_2(cli_results, case):
    result = cli_results[case]
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert BAD_PATHS[case][0] in lines[0]
    assert result.stdout == ""


def test_cli_warns_but_succeeds_on_unknown_domain_and_hostile_names(tmp_path):
    custom = zoo.save(zoo.custom_domain_model(opset=onnx.defs.onnx_opset_version() + 1), tmp_path)
    hostile = zoo.save(zoo.hostile_names(), tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "dashboard", "classify", str(path), *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
             for path, extra in ((custom, []), (hostile, ["--json"]))]
    (out_c, err_c), (out_h, err_h) = (p.communicate(timeout=120) for p in procs)
    assert procs[0].returncode == 0, err_c
    assert "warning:" in err_c and "com.example.custom" in err_c and "Traceback" not in err_c
    assert procs[1].returncode == 0, err_h
    report = json.loads(out_h)
    assert report["nodes"] == len(zoo.HOSTILE_NAMES)


def test_load_structure_keeps_small_initializers_and_only_headers_of_large_ones(tmp_path):
    """The weight-free ModelProto used for shape inference: nodes as stored, small tensors whole
    (Reshape targets), large ones with dims and dtype but no data; shape inference still works."""
    from dashboard.intake.reader import load_structure

    path = tmp_path / "big.onnx"
    write_big_model(path, 1024, 32768)
    structure = load_structure(path)
    (weight,) = structure.graph.initializer
    assert (weight.name, list(weight.dims), weight.data_type) == ("W", [1024, 32768], TensorProto.FLOAT)
    assert not weight.raw_data and not weight.float_data
    assert structure.ByteSize() < 4096
    inferred = onnx.shape_inference.infer_shapes(structure)
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [1, 32768]

    small = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "shape")])
    small_path = tmp_path / "small.onnx"
    onnx.save(helper.make_model(small, opset_imports=[helper.make_opsetid("", 17)]), small_path)
    assert load_structure(small_path).graph.initializer[0] == onnx.load(small_path).graph.initializer[0]


# hashing shows progress ----------------------------------------------------------------------

def test_file_digest_reports_progress_and_keeps_the_hash(tmp_path):
    import hashlib

    from dashboard.intake.digest import DIGEST_CHUNK, file_digest

    path = tmp_path / "big.bin"
    path.write_bytes(np.random.default_rng(5).bytes(3 * DIGEST_CHUNK + 12345))
    calls = []
    digest = file_digest(path, lambda done, total: calls.append((done, total)))
    assert digest == file_digest(path) == hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    size = path.stat().st_size
    assert [d for d, _ in calls] == [DIGEST_CHUNK, 2 * DIGEST_CHUNK, 3 * DIGEST_CHUNK, size]
    assert {t for _, t in calls} == {size}


def test_commands_show_hashing_progress_of_a_large_model_on_stderr(tmp_path, capsys):
    """The command line installs a stderr reporter for every hash it makes (partition and timeline
    hash deep inside, some on a thread); a 300 MB file shows its tenths, a small one nothing."""
    from dashboard.cli.common import stderr_progress
    from dashboard.intake import digest

    big, small = tmp_path / "big.onnx", tmp_path / "small.onnx"
    with open(big, "wb") as handle:
        handle.truncate(300 << 20)
    small.write_bytes(b"x" * 1000)
    digest.report_digest_progress(stderr_progress())
    try:
        digest.file_digest(small)
        assert capsys.readouterr().err == ""
        digest.file_digest(big)
    finally:
        digest.report_digest_progress(None)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "hashing the model:   0% of 0.3 GiB" and lines[-1] == "hashing the model: 100% of 0.3 GiB"
    assert len(lines) == 11
    digest.file_digest(big)
    assert capsys.readouterr().err == ""  # uninstalled: the library itself never prints


def test_cli_main_installs_the_progress_reporter(tmp_path):
    """After a command ran, a hash in that process shows on stderr (partition and timeline hash
    with ``file_digest`` after ``main`` has dispatched)."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as handle:
        handle.truncate(300 << 20)
    script = ("import sys; from dashboard.cli.main import main; from dashboard.intake.digest import file_digest; "
              "main(['classify', sys.argv[1], '--json']); file_digest(sys.argv[2])")
    model = zoo.save(zoo.ZOO["mlp_tabular"].build(), tmp_path)
    done = subprocess.run([sys.executable, "-c", script, str(model), str(big)], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "hashing the model: 100% of 0.3 GiB"
