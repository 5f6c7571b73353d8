"""Model intake: read an ONNX file's graph structure without loading its weights.

``load_model`` returns the data model of ``dashboard.intake.graph``. Weights are never read:
initializers contribute only their name, dtype, shape and byte size, and external-data files are
checked for a safe location but not opened. Tensors over ``SMALL_TENSOR_BYTES`` anywhere inside a
node (a Constant's value, a Loop body's initializer) lose their data at the wire level before
parsing, like weights.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import GraphProto, ModelProto, TensorProto

from dashboard.errors import ModelError
from dashboard.intake.graph import (MS_DOMAIN, SMALL_TENSOR_BYTES, Initializer, ModelGraph, Node, build_nodes,
                                    sparse_header, tensor_header, value_spec)
from dashboard.intake.wire import LENGTH, WireError, copy_fields_except, encode_length_delimited, iter_fields

# ModelProto / GraphProto / TensorProto field numbers (onnx.proto).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 5, 15
_TENSOR_DATA_FIELDS = frozenset({4, 5, 6, 7, 9, 10, 11})  # float/int32/string/int64/raw/double/uint64
_TENSOR_STRING_DATA = 6


# Where tensors can hide, by message kind: field number -> kind of the sub-message stored there
# (onnx.proto). ``_without_large_tensors`` follows exactly these paths.
_MODEL, _FUNCTION, _TRAINING, _NODE, _ATTRIBUTE, _GRAPH, _TENSOR, _SPARSE = range(8)
_TENSOR_PATHS = {
    _MODEL: {20: _TRAINING, 25: _FUNCTION},
    _TRAINING: {1: _GRAPH, 2: _GRAPH},
    _FUNCTION: {7: _NODE, 11: _ATTRIBUTE},
    _NODE: {5: _ATTRIBUTE},
    _ATTRIBUTE: {5: _TENSOR, 6: _GRAPH, 10: _TENSOR, 11: _GRAPH, 22: _SPARSE, 23: _SPARSE},
    _GRAPH: {1: _NODE, 5: _TENSOR, 15: _SPARSE},
    _SPARSE: {1: _TENSOR, 2: _TENSOR},
}

KNOWN_DOMAINS = frozenset({
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview", MS_DOMAIN,
    "com.microsoft.nchwc", "com.microsoft.experimental", "com.ms.internal.nhwc",
    "com.microsoft.extensions", "org.pytorch.aten", "pkg.onnxscript.torch_lib",
    "pkg.onnxscript.torch_lib.common",
})

def file_digest(path: str | os.PathLike) -> str:
    """Content hash used as the cache key for everything derived from a model."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_model(path: str | os.PathLike) -> ModelGraph:
    """Read the graph structure of the ONNX file at ``path``.

    Raises ``ModelError`` with a one-line explanation for anything that is not a readable,
    well-formed ONNX model (missing, empty, truncated, archive, directory, cycles, dangling inputs,
    external data outside the model's folder).
    """
    model_path = Path(path)
    if not model_path.exists():
        raise ModelError(f"{model_path}: no such file")
    if model_path.is_dir():
        inside = sorted(p.name for p in model_path.glob("*.onnx"))
        hint = f" (it holds {', '.join(inside[:3])})" if inside else ""
        raise ModelError(f"{model_path}: is a directory, not an .onnx file{hint}")
    size = model_path.stat().st_size
    if size == 0:
        raise ModelError(f"{model_path}: file is empty")
    with open(model_path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        _refuse_known_non_onnx(model_path, buf)
        try:
            model, graph, initializers = _parse(buf)
        except (WireError, DecodeError) as exc:
            if _looks_like_text(buf):
                raise ModelError(f"{model_path}: is a text file, not an ONNX protobuf") from None
            raise ModelError(f"{model_path}: not a valid ONNX file (truncated or corrupt: {exc})") from None
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelError(f"{model_path}: not an ONNX model (no IR version or graph in the protobuf)")
    if not model.opset_import:
        # Required since IR 3 and the last field an exporter writes: missing means cut short.
        raise ModelError(f"{model_path}: not a complete ONNX model (no opset_import; truncated?)")
    _check_external_locations(model_path, initializers)
    return _build(model_path, size, model, graph, initializers)


_MAGIC = [
    (b"PK\x03\x04", "a zip archive (or a PyTorch checkpoint); extract or export the .onnx file first"),
    (b"\x1f\x8b", "a gzip archive; decompress it first"),
    (b"\x89PNG", "a PNG image, not a model"),
    (b"%PDF", "a PDF document, not a model"),
    (b"7z\xbc\xaf", "a 7-zip archive; extract the .onnx file first"),
    (b"\x7fELF", "an executable, not a model"),
]


def _refuse_known_non_onnx(path: Path, buf) -> None:
    head = bytes(buf[:16])
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise ModelError(f"{path}: is {what}")
    if len(buf) > 262 and bytes(buf[257:262]) == b"ustar":
        raise ModelError(f"{path}: is a tar archive; extract the .onnx file first")
    if head[4:8] == b"ORTM":
        raise ModelError(f"{path}: is an ORT-format model; give the original .onnx file")
    if head.lstrip()[:1] in (b"{", b"[", b"<"):
        raise ModelError(f"{path}: is a text file (JSON/XML/HTML), not an ONNX protobuf")


def _looks_like_text(buf) -> bool:
    """Printable UTF-8 at the start (asked only after the protobuf parse failed, so a valid model
    whose bytes happen to be printable is never refused for it)."""
    sample = bytes(buf[:4096])
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 3:  # not just a character cut at the sample's end
            return False
        text = sample[:exc.start].decode("utf-8")
    return bool(text) and all(c.isprintable() or c in "\t\r\n\f" for c in text)


def load_structure(path: str | os.PathLike) -> ModelProto:
    """The model as an ``onnx.ModelProto`` without weight data: small initializers whole (shape
    inference needs Reshape targets and the like), large ones as headers (name, dtype, dims).
    For shape inference and graph rewriting, where ``onnx.load`` would copy every weight. Call
    ``load_model`` first: this assumes a file it accepted."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        model, _, _ = _parse(buf, keep_initializers=True)
    return model


def _parse(buf, keep_initializers: bool = False) -> tuple[ModelProto, GraphProto, list[Initializer]]:
    top = list(iter_fields(buf))
    rest = copy_fields_except(buf, top, frozenset({_MODEL_GRAPH}), _large_fields(buf, top, _MODEL))
    model = ModelProto.FromString(rest)
    graph_fields = [f for f in top if f.number == _MODEL_GRAPH and f.wire_type == LENGTH]
    graph = model.graph  # parsed in place: copying a 20,000-node graph afterwards costs ~50 ms
    if graph_fields:
        graph.SetInParent()
    initializers: list[Initializer] = []
    for graph_field in graph_fields:
        fields = list(iter_fields(buf, graph_field.value_start, graph_field.end))
        skip = frozenset({_GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER})
        graph.MergeFromString(copy_fields_except(buf, fields, skip, _large_fields(buf, fields, _GRAPH, skip)))
        for f in fields:
            if f.number == _GRAPH_INITIALIZER and f.wire_type == LENGTH:
                proto, string_bytes = _initializer_proto(buf, f.value_start, f.end)
                initializers.append(tensor_header(proto, string_bytes))
                if keep_initializers:
                    graph.initializer.append(proto)
            elif f.number == _GRAPH_SPARSE_INITIALIZER and f.wire_type == LENGTH:
                sparse = onnx.SparseTensorProto.FromString(_without_large_tensors(buf, f.value_start, f.end, _SPARSE))
                initializers.append(sparse_header(sparse))
                if keep_initializers:
                    graph.sparse_initializer.append(sparse)
    return model, graph, initializers


def _large_fields(buf, fields, kind: int, skip: frozenset[int] = frozenset()) -> dict[int, bytes]:
    """Replacements (for ``copy_fields_except``) of the fields of a ``kind`` message that are larger
    than SMALL_TENSOR_BYTES and may hold tensors: re-encoded without large tensor data. A field this
    small cannot hold a large tensor and is copied as is, so a typical graph replaces nothing."""
    paths = _TENSOR_PATHS[kind]
    return {f.start: encode_length_delimited(f.number, _without_large_tensors(buf, f.value_start, f.end,
                                                                               paths[f.number]))
            for f in fields if f.number in paths and f.number not in skip and f.wire_type == LENGTH
            and f.end - f.value_start > SMALL_TENSOR_BYTES}


def _without_large_tensors(buf, start: int, end: int, kind: int) -> bytes:
    """The ``kind`` message in ``buf[start:end]`` re-encoded with the data of every tensor over
    SMALL_TENSOR_BYTES dropped (dims, dtype, name and external-data entries kept)."""
    fields = list(iter_fields(buf, start, end))
    if kind == _TENSOR:
        return copy_fields_except(buf, fields, _TENSOR_DATA_FIELDS)
    return copy_fields_except(buf, fields, frozenset(), _large_fields(buf, fields, kind))


def _initializer_proto(buf, start: int, end: int) -> tuple[TensorProto, int | None]:
    """The initializer at ``buf[start:end]``: whole when small, else its header without data
    (and the byte size of any string data skipped)."""
    # Speed: scanning a tensor's fields in Python costs ~40 us; the C++ parser reads a small one
    # whole in a few. Large tensors still have their data skipped, so memory stays bounded.
    if end - start <= SMALL_TENSOR_BYTES:
        return TensorProto.FromString(bytes(buf[start:end])), None
    fields = list(iter_fields(buf, start, end))
    header = TensorProto.FromString(copy_fields_except(buf, fields, _TENSOR_DATA_FIELDS))
    return header, sum(f.end - f.value_start for f in fields if f.number == _TENSOR_STRING_DATA)


def _check_external_locations(model_path: Path, initializers: list[Initializer]) -> None:
    base = model_path.resolve().parent
    for init in initializers:
        location = init.external_location
        if location is None:
            continue
        if not location or os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
            raise ModelError(
                f"{model_path}: initializer {init.name!r} points to external data at {location!r}, "
                "which is not a relative path inside the model's folder; refusing to read it")
        target = (base / location).resolve()
        if os.path.commonpath([base, target]) != str(base):
            raise ModelError(
                f"{model_path}: initializer {init.name!r} points to external data at {location!r}, "
                "outside the model's folder; refusing to read it")


def _build(path: Path, size: int, model: ModelProto, graph: GraphProto, inits: list[Initializer]) -> ModelGraph:
    opsets = {op.domain or "": op.version for op in model.opset_import}
    if "ai.onnx" in opsets and "" not in opsets:
        opsets[""] = opsets.pop("ai.onnx")
    nodes = build_nodes(graph.node)
    initializers = {i.name: i for i in inits}
    listed_inputs = [value_spec(v) for v in graph.input]
    warnings = _compatibility_warnings(model, opsets, nodes)
    topo = _topological_order(path, nodes, {v.name for v in listed_inputs} | set(initializers))
    return ModelGraph(
        path=str(path),
        file_bytes=size,
        ir_version=model.ir_version,
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        opsets=opsets,
        graph_name=graph.name,
        listed_inputs=listed_inputs,
        outputs=[value_spec(v) for v in graph.output],
        nodes=nodes,
        initializers=initializers,
        value_info={v.name: value_spec(v) for v in graph.value_info},
        topo_order=topo,
        warnings=warnings,
    )


def _compatibility_warnings(model: ModelProto, opsets: dict[str, int], nodes: list[Node]) -> list[str]:
    warnings = []
    if model.ir_version > onnx.IR_VERSION:
        warnings.append(f"IR version {model.ir_version} is newer than this onnx package knows ({onnx.IR_VERSION})")
    latest = onnx.defs.onnx_opset_version()
    if opsets.get("", 0) > latest:
        warnings.append(f"ai.onnx opset {opsets['']} is newer than the latest known ({latest}); "
                        "onnxruntime may refuse this model")
    used = {n.domain if n.domain != "ai.onnx" else "" for n in nodes}
    unknown = sorted(d for d in used if d not in KNOWN_DOMAINS)
    if unknown:
        warnings.append("custom op domains (need a custom-op library to run): " + ", ".join(unknown))
    missing = sorted(d for d in used if d not in opsets)
    if missing:
        warnings.append("ops from domains without an opset import: " + ", ".join(d or "ai.onnx" for d in missing))
    return warnings


def _topological_order(path: Path, nodes: list[Node], graph_inputs: set[str]) -> list[int]:
    """Kahn's algorithm over top-level nodes; refuses cycles and inputs nothing produces."""
    producer: dict[str, int] = {}
    for node in nodes:
        for out in node.outputs:
            if out:
                producer[out] = node.index
    consumers: list[list[int]] = [[] for _ in nodes]
    indegree = [0] * len(nodes)
    for node in nodes:
        for name in set(node.inputs):
            if not name:
                continue
            src = producer.get(name)
            if src is None:
                if name not in graph_inputs:
                    raise ModelError(
                        f"{path}: node {node.name!r} reads tensor {name!r}, which no node, graph input "
                        "or initializer provides (dangling reference)")
                continue
            consumers[src].append(node.index)
            indegree[node.index] += 1
    ready = [n.index for n in nodes if indegree[n.index] == 0]
    ready.reverse()
    order: list[int] = []
    while ready:
        current = ready.pop()
        order.append(current)
        for nxt in consumers[current]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    if len(order) != len(nodes):
        stuck = next(n.name for n in nodes if indegree[n.index] > 0)
        raise ModelError(f"{path}: the graph has a cycle (node {stuck!r} depends on its own output)")
    return order
