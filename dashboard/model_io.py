"""Model intake: read an ONNX file's graph structure without loading its weights.

The result, ``ModelGraph``, is the data model every other module works from (classifiers,
partitions, plans, pages). Weights are never read: initializers contribute only their name, dtype,
shape and byte size, and external-data files are checked for a safe location but not opened.
Nodes carry their attributes and control-flow bodies (decoded on first access from the parsed
node, so the file is read exactly once); tensors over ``SMALL_TENSOR_BYTES`` anywhere inside a node
(a Constant's value, a Loop body's initializer) lose their data at the wire level before parsing,
like weights.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Union

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, numpy_helper

from .errors import ModelError
from .protowire import LENGTH, WireError, copy_fields_except, encode_length_delimited, iter_fields

Dim = int | str | None

# ModelProto / GraphProto / TensorProto field numbers (onnx.proto).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 5, 15
_TENSOR_DATA_FIELDS = frozenset({4, 5, 6, 7, 9, 10, 11})  # float/int32/string/int64/raw/double/uint64
_TENSOR_STRING_DATA = 6

# Tensors up to this size are small: parsed whole, and their values kept when they sit in an
# attribute (a Constant mask, a ConstantOfShape fill). Larger ones are weights: header only.
SMALL_TENSOR_BYTES = 1 << 16

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

MS_DOMAIN = "com.microsoft"
KNOWN_DOMAINS = frozenset({
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview", MS_DOMAIN,
    "com.microsoft.nchwc", "com.microsoft.experimental", "com.ms.internal.nhwc",
    "com.microsoft.extensions", "org.pytorch.aten", "pkg.onnxscript.torch_lib",
    "pkg.onnxscript.torch_lib.common",
})

_BITS = {
    TensorProto.FLOAT: 32, TensorProto.UINT8: 8, TensorProto.INT8: 8, TensorProto.UINT16: 16,
    TensorProto.INT16: 16, TensorProto.INT32: 32, TensorProto.INT64: 64, TensorProto.BOOL: 8,
    TensorProto.FLOAT16: 16, TensorProto.DOUBLE: 64, TensorProto.UINT32: 32,
    TensorProto.UINT64: 64, TensorProto.COMPLEX64: 64, TensorProto.COMPLEX128: 128,
    TensorProto.BFLOAT16: 16, TensorProto.FLOAT8E4M3FN: 8, TensorProto.FLOAT8E4M3FNUZ: 8,
    TensorProto.FLOAT8E5M2: 8, TensorProto.FLOAT8E5M2FNUZ: 8, TensorProto.UINT4: 4,
    TensorProto.INT4: 4,
}
_NP_NAMES = {"FLOAT": "float32", "DOUBLE": "float64", "UNDEFINED": "undefined"}
_GRAPH_ATTRIBUTES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


@lru_cache(maxsize=None)
def dtype_name(elem_type: int) -> str:
    """ONNX element type as a short lowercase name (``float32``, ``int64``, ``int4`` ...).
    Cached: it runs once per initializer and value info."""
    try:
        name = TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type{elem_type}"
    return _NP_NAMES.get(name, name.lower())


def dtype_bits(elem_type: int) -> int:
    """Bits per element, 0 for strings and unknown types."""
    return _BITS.get(elem_type, 0)


@dataclass(frozen=True)
class TensorSpec:
    """A graph input, output or value-info entry."""

    name: str
    dtype: str
    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown; str: symbolic; None inside: unnamed dynamic

    @property
    def symbolic_dims(self) -> list[str]:
        """Names of the dimensions that are not fixed (unnamed ones shown as ``?``)."""
        if self.shape is None:
            return []
        return [d if isinstance(d, str) else "?" for d in self.shape if not isinstance(d, int)]

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def shape_text(self) -> str:
        if self.shape is None:
            return "?"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"

    def nbytes(self, overrides: dict[str, int] | None = None) -> int | None:
        """Size in bytes once symbolic dims are fixed by ``overrides``; None if still unknown."""
        if self.shape is None:
            return None
        count = 1
        for dim in self.shape:
            if isinstance(dim, str) and overrides and dim in overrides:
                dim = overrides[dim]
            if not isinstance(dim, int) or dim < 0:
                return None
            count *= dim
        return count * dtype_bits(self.elem_type) // 8


@dataclass(frozen=True)
class Initializer:
    """A weight: header only, its bytes stay on disk."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    external_location: str | None


@dataclass(frozen=True)
class TensorValue(Initializer):
    """A tensor held in an attribute (a Constant's value, ConstantOfShape's fill): the header of an
    ``Initializer``, plus its values when it is small (``nbytes <= SMALL_TENSOR_BYTES``) and stored
    in the file. Larger or external tensors keep ``values=None``: like weights, never read."""

    values: np.ndarray | None = field(default=None, repr=False, compare=False)


AttributeValue = Union[int, float, str, bytes, TensorValue, "SubGraph", TensorSpec, list, None]


@dataclass(frozen=True)
class Node:
    """A node of the top-level graph or of a body. ``name`` is unique and stable within its graph
    (generated for unnamed or duplicate names, see ``stable_node_names``); ``onnx_name`` is the name
    as stored in the file.

    ``proto`` is the node as parsed (large tensors already stripped). ``attributes`` and ``bodies``
    are decoded from it on first access and cached: a 20,000-node graph pays nothing at load time
    for attributes nobody asks for, and nothing ever reads the file again."""

    index: int
    name: str
    onnx_name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    subgraphs: int
    proto: NodeProto | None = field(default=None, repr=False, compare=False)

    @property
    def qualified_op(self) -> str:
        return self.op_type if self.domain in ("", "ai.onnx") else f"{self.domain}::{self.op_type}"

    @cached_property
    def attributes(self) -> dict[str, AttributeValue]:
        """Attribute name -> plain value: int, float, str (bytes if not UTF-8), lists of those,
        ``TensorValue`` for tensors, ``SubGraph`` for graphs, ``TensorSpec`` for type attributes;
        None for an attribute without a type."""
        if self.proto is None:
            return {}
        return {a.name: _attribute_value(a) for a in self.proto.attribute}

    @cached_property
    def bodies(self) -> dict[str, SubGraph]:
        """Subgraph bodies by attribute name (``then_branch``, ``body`` ...); the k-th graph of a
        GRAPHS attribute holding several is ``name[k]``."""
        bodies: dict[str, SubGraph] = {}
        for name, value in self.attributes.items() if self.subgraphs else ():
            graphs = [value] if isinstance(value, SubGraph) else [
                v for v in value if isinstance(v, SubGraph)] if isinstance(value, list) else []
            for k, graph in enumerate(graphs):
                bodies[name + (f"[{k}]" if len(graphs) > 1 else "")] = graph
        return bodies


@dataclass
class SubGraph:
    """A control-flow body (If branch, Loop/Scan body): the same structure as ``ModelGraph`` and the
    same rule for weights (initializer headers only)."""

    name: str
    inputs: list[TensorSpec]  # formal inputs in order (Loop: iteration, condition, carried state)
    outputs: list[TensorSpec]
    nodes: list[Node]
    initializers: dict[str, Initializer]
    value_info: dict[str, TensorSpec]


@dataclass
class ModelGraph:
    """Structure of one ONNX model, as the classifiers, partitions and pages need it."""

    path: str
    file_bytes: int
    ir_version: int
    producer: str
    opsets: dict[str, int]
    graph_name: str
    listed_inputs: list[TensorSpec]  # graph.input as stored (may include initializers)
    outputs: list[TensorSpec]
    nodes: list[Node]
    initializers: dict[str, Initializer]
    value_info: dict[str, TensorSpec]
    topo_order: list[int]
    warnings: list[str] = field(default_factory=list)

    @property
    def inputs(self) -> list[TensorSpec]:
        """Inputs a caller must feed (graph inputs that are not initializers)."""
        return [t for t in self.listed_inputs if t.name not in self.initializers]

    @property
    def weight_bytes(self) -> int:
        return sum(i.nbytes for i in self.initializers.values())

    @property
    def external_bytes(self) -> int:
        return sum(i.nbytes for i in self.initializers.values() if i.external_location)

    def op_histogram(self) -> Counter:
        return Counter(n.qualified_op for n in self.nodes)

    def node_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}


def stable_node_names(raw: list[tuple[str, str]]) -> list[str]:
    """Unique display names for ``(onnx_name, op_type)`` pairs in graph order.

    A named node keeps its name the first time it appears. An unnamed node, or a later duplicate,
    becomes ``<name or op_type>#<index>`` (index in graph order), which cannot collide with a name
    from an exporter because exporters do not put ``#`` in names; the suffix grows if it still does.
    The UI, the CLI and the partition reports all use these names.
    """
    taken = {name for name, _ in raw if name}
    seen: set[str] = set()
    names = []
    for index, (name, op_type) in enumerate(raw):
        if name and name not in seen:
            seen.add(name)
            names.append(name)
            continue
        candidate = f"{name or op_type}#{index}"
        while candidate in taken or candidate in seen:
            candidate += "'"
        seen.add(candidate)
        names.append(candidate)
    return names


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
                initializers.append(_tensor_header(proto, string_bytes))
                if keep_initializers:
                    graph.initializer.append(proto)
            elif f.number == _GRAPH_SPARSE_INITIALIZER and f.wire_type == LENGTH:
                sparse = onnx.SparseTensorProto.FromString(_without_large_tensors(buf, f.value_start, f.end, _SPARSE))
                initializers.append(_sparse_header(sparse))
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


def _tensor_header(header: TensorProto, string_bytes: int | None = None) -> Initializer:
    """Name, dtype, shape and size of a tensor. Strings are sized from their data (0 once stripped
    inside a large node), or from ``string_bytes`` when the caller skipped the data itself."""
    shape = tuple(header.dims)
    count = 1
    for dim in shape:
        count *= dim
    nbytes = (count * dtype_bits(header.data_type) + 7) // 8
    if header.data_type == TensorProto.STRING:
        nbytes = sum(len(s) for s in header.string_data) if string_bytes is None else string_bytes
    location = None
    if header.data_location == TensorProto.EXTERNAL:
        entries = {e.key: e.value for e in header.external_data}
        location = entries.get("location", "")
        if "length" in entries and entries["length"].isdigit():
            nbytes = int(entries["length"])
    return Initializer(header.name, dtype_name(header.data_type), shape, nbytes, location)


def _sparse_header(sparse: onnx.SparseTensorProto) -> Initializer:
    values = sparse.values
    count = 1
    for dim in values.dims:
        count *= dim
    nbytes = (count * dtype_bits(values.data_type) + 7) // 8
    return Initializer(values.name, dtype_name(values.data_type), tuple(sparse.dims), nbytes, None)


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


def _spec(value_info: onnx.ValueInfoProto) -> TensorSpec:
    return _type_spec(value_info.name, value_info.type)


def _type_spec(name: str, type_proto: onnx.TypeProto) -> TensorSpec:
    kind = type_proto.WhichOneof("value")
    if kind != "tensor_type":
        return TensorSpec(name, kind.replace("_type", "") if kind else "unknown", 0, None)
    tensor = type_proto.tensor_type
    shape: tuple[Dim, ...] | None = None
    if tensor.HasField("shape"):
        dims: list[Dim] = []
        for dim in tensor.shape.dim:
            which = dim.WhichOneof("value")
            dims.append(dim.dim_value if which == "dim_value" else dim.dim_param if which == "dim_param" else None)
        shape = tuple(dims)
    return TensorSpec(name, dtype_name(tensor.elem_type), tensor.elem_type, shape)


# -- attributes and bodies, decoded on first access -----------------------------------------------

def _nodes(protos) -> list[Node]:
    """``Node``s for the NodeProtos of one graph (top level or body), in order."""
    names = stable_node_names([(n.name, n.op_type) for n in protos])
    return [Node(i, names[i], n.name, n.op_type, n.domain, tuple(n.input), tuple(n.output),
                 sum(1 for a in n.attribute if a.type in _GRAPH_ATTRIBUTES) if n.attribute else 0, n)
            for i, n in enumerate(protos)]


def _subgraph(graph: GraphProto) -> SubGraph:
    inits = [_tensor_header(t) for t in graph.initializer] + [_sparse_header(s) for s in graph.sparse_initializer]
    return SubGraph(graph.name, [_spec(v) for v in graph.input], [_spec(v) for v in graph.output],
                    _nodes(graph.node), {i.name: i for i in inits}, {v.name: _spec(v) for v in graph.value_info})


def _tensor_value(tensor: TensorProto) -> TensorValue:
    header = _tensor_header(tensor)
    values = None
    if header.external_location is None and header.nbytes <= SMALL_TENSOR_BYTES:
        try:
            values = numpy_helper.to_array(tensor)
        except (ValueError, TypeError):  # no data: stripped (stored larger than it counts) or malformed
            pass
    return TensorValue(header.name, header.dtype, header.shape, header.nbytes, header.external_location, values)


def _sparse_value(sparse: onnx.SparseTensorProto) -> TensorValue:
    header = _sparse_header(sparse)  # values are not densified: no consumer needs them
    return TensorValue(header.name, header.dtype, header.shape, header.nbytes, None)


def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


_DECODERS = {
    AttributeProto.FLOAT: lambda a: a.f,
    AttributeProto.INT: lambda a: a.i,
    AttributeProto.STRING: lambda a: _text(a.s),
    AttributeProto.TENSOR: lambda a: _tensor_value(a.t),
    AttributeProto.GRAPH: lambda a: _subgraph(a.g),
    AttributeProto.SPARSE_TENSOR: lambda a: _sparse_value(a.sparse_tensor),
    AttributeProto.TYPE_PROTO: lambda a: _type_spec("", a.tp),
    AttributeProto.FLOATS: lambda a: list(a.floats),
    AttributeProto.INTS: lambda a: list(a.ints),
    AttributeProto.STRINGS: lambda a: [_text(s) for s in a.strings],
    AttributeProto.TENSORS: lambda a: [_tensor_value(t) for t in a.tensors],
    AttributeProto.GRAPHS: lambda a: [_subgraph(g) for g in a.graphs],
    AttributeProto.SPARSE_TENSORS: lambda a: [_sparse_value(t) for t in a.sparse_tensors],
    AttributeProto.TYPE_PROTOS: lambda a: [_type_spec("", t) for t in a.type_protos],
}


def _attribute_value(attr: AttributeProto) -> AttributeValue:
    decode = _DECODERS.get(attr.type)
    return decode(attr) if decode is not None else None


def _build(path: Path, size: int, model: ModelProto, graph: GraphProto, inits: list[Initializer]) -> ModelGraph:
    opsets = {op.domain or "": op.version for op in model.opset_import}
    if "ai.onnx" in opsets and "" not in opsets:
        opsets[""] = opsets.pop("ai.onnx")
    nodes = _nodes(graph.node)
    initializers = {i.name: i for i in inits}
    listed_inputs = [_spec(v) for v in graph.input]
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
        outputs=[_spec(v) for v in graph.output],
        nodes=nodes,
        initializers=initializers,
        value_info={v.name: _spec(v) for v in graph.value_info},
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
