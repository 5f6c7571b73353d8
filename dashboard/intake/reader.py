"""Model intake: read an ONNX file's graph structure without loading its weights.

``load_model`` returns the data model of ``dashboard.intake.graph``. Weights are never read:
initializers contribute only their name, dtype, shape and byte size, and external-data files are
checked for a safe location but not opened. Tensors over ``SMALL_TENSOR_BYTES`` anywhere inside a
node (a Constant's value, a Loop body's initializer) lose their data at the wire level before
parsing, like weights.

What is refused, in one line each: anything that is not a well-formed ONNX model (archives, text,
truncation, cycles, dangling inputs), a string field that is not UTF-8, and any tensor, wherever it
sits (initializers, sparse initializers, Constant and other attribute tensors, control-flow bodies
at any depth, functions), whose external data would be read from outside the model's folder.
"""

from __future__ import annotations

import gc
import mmap
import os
import stat
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import DecodeError

from dashboard.errors import ModelError
from dashboard.intake import caps, proto, utf8
from dashboard.intake.graph import (MS_DOMAIN, SMALL_TENSOR_BYTES, Initializer, ModelGraph, Node, build_nodes,
                                    sparse_header, tensor_header, value_spec)
from dashboard.intake.proto import AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto, TensorProto
from dashboard.intake.wire import LENGTH, Field, WireError, count_fields, encode_length_delimited, split_message

# ModelProto / GraphProto / TensorProto field numbers (onnx.proto).
_MODEL_GRAPH = 7
_GRAPH_NODE = 1
_GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 5, 15
_GRAPH_WEIGHTS = frozenset({_GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER})
_TENSOR_DATA_FIELDS = frozenset({4, 5, 6, 7, 9, 10, 11})  # float/int32/string/int64/raw/double/uint64
_TENSOR_STRING_DATA = 6

# Where tensors can hide, by message kind: field number -> kind of the sub-message stored there
# (onnx.proto). ``_stripped`` follows exactly these paths.
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
# A tensor can point at a file only through an external-data entry keyed "location", whose bytes
# then appear verbatim in what protobuf parses.
_LOCATION_KEY = b"location"

KNOWN_DOMAINS = frozenset({
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview", MS_DOMAIN,
    "com.microsoft.nchwc", "com.microsoft.experimental", "com.ms.internal.nhwc",
    "com.microsoft.extensions", "org.pytorch.aten", "pkg.onnxscript.torch_lib",
    "pkg.onnxscript.torch_lib.common",
})

WEIGHT_BATCH_BYTES = 16 << 20  # small initializers parsed per protobuf call, at most


def load_model(path: str | os.PathLike, file_name: str | None = None) -> ModelGraph:
    """Read the graph structure of the ONNX file at ``path``; ``file_name`` is the name the user
    knows it by when that is not the file's own (an upload, stored under its digest).

    Raises ``ModelError`` with a one-line explanation, naming ``path`` as given, for anything that
    is not a readable, well-formed ONNX model (missing, empty, truncated, archive, directory, pipe
    or device, symlink loop, nested beyond protobuf's limit, cycles, dangling inputs or outputs, no
    outputs, text that is not UTF-8, external data outside the model's folder), and for a model
    over one of the caps of ``dashboard.intake.caps`` (nodes, one string's size, structure bytes),
    checked before or while protobuf parses it.
    """
    model_path = Path(path)
    try:
        graph = _load(model_path)
    except caps.CapExceeded as exc:
        raise ModelError(f"{model_path}: {exc.message()}") from None
    graph.file_name = file_name or model_path.name
    return graph


def _load(model_path: Path) -> ModelGraph:
    size = model_file_size(model_path)
    for cap in caps.CAPS:
        cap.limit()  # a malformed setting is its own one-line error, before the file is mapped
    refused = None
    with _mapped(model_path) as buf:
        _refuse_known_non_onnx(model_path, buf)
        try:
            with _gc_paused():
                parsed = _parse(buf)
        except caps.CapExceeded as exc:  # raised below, once the frames holding views of the mapping are gone
            parsed, refused = None, exc.message()
        except (WireError, DecodeError) as exc:
            if "alloc failed" in str(exc):  # protobuf's arena out of memory: the machine's limit, not the file
                raise MemoryError(str(exc)) from None
            if _looks_like_text(buf):
                raise ModelError(f"{model_path}: is a text file, not an ONNX protobuf") from None
            raise ModelError(f"{model_path}: not a valid ONNX file (truncated or corrupt: {exc})") from None
        except RecursionError:  # raised below, once the frames holding views of the mapping are gone
            parsed = None
    if refused is not None:
        raise ModelError(f"{model_path}: {refused}")
    if parsed is None:
        raise ModelError(f"{model_path}: not a valid ONNX file (messages nested thousands deep, far beyond what "
                         "protobuf parses)")
    model = parsed.model
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelError(f"{model_path}: not an ONNX model (no IR version or graph in the protobuf)")
    if not model.opset_import:
        # Required since IR 3 and the last field an exporter writes: missing means cut short.
        raise ModelError(f"{model_path}: not a complete ONNX model (no opset_import; truncated?)")
    _check_text(model_path, parsed)
    _check_external_locations(model_path, parsed)
    _check_dims(model_path, parsed)
    with _gc_paused():
        return _build(model_path, size, parsed)


def _check_dims(model_path: Path, parsed: _Parsed) -> None:
    """Weights have no negative dimension (the ONNX spec; ONNX Runtime refuses them): a negative
    one made the model's weight total negative on every page."""
    bad = next((i for i in parsed.initializers if any(d < 0 for d in i.shape)), None)
    if bad is not None:
        raise ModelError(f"{model_path}: initializer {bad.name!r} has a negative dimension {list(bad.shape)}; the file "
                         "is corrupt")


def model_file_size(model_path: Path) -> int:
    """The size of the regular, non-empty file at ``model_path``; anything else is a ``ModelError``
    naming what it is (missing, a symlink loop, a directory, a pipe or device, empty). Why check
    before opening: a FIFO would block the reader (or a hash of the file) forever, and a device has
    no size to map."""
    try:
        info = model_path.stat()
    except FileNotFoundError:
        raise ModelError(f"{model_path}: no such file") from None
    except (OSError, ValueError) as exc:  # a symlink loop, a name too long, a NUL byte
        raise ModelError(f"{model_path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        inside = sorted(p.name for p in model_path.glob("*.onnx"))
        hint = f" (it holds {', '.join(inside[:3])})" if inside else ""
        raise ModelError(f"{model_path}: is a directory, not an .onnx file{hint}")
    if not stat.S_ISREG(info.st_mode):
        raise ModelError(f"{model_path}: is not a regular file (a pipe, socket or device); save the model to a file")
    if info.st_size == 0:
        raise ModelError(f"{model_path}: file is empty")
    return info.st_size


@contextmanager
def _mapped(model_path: Path) -> Iterator[memoryview]:
    """The file's bytes, memory-mapped: the weights are never copied into this process."""
    with ExitStack() as stack:
        try:
            handle = stack.enter_context(open(model_path, "rb"))
            mapped = stack.enter_context(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError) as exc:  # unreadable, or emptied since it was checked
            raise ModelError(f"{model_path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
        yield stack.enter_context(memoryview(mapped))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a graph is built. Why: reading a 20,000-node graph creates
    a few hundred thousand objects, none of them in a cycle, and every collection the allocations
    trigger walks all of them again (a third of the load time). Nothing is lost: a collection
    runs as usual once the objects are built."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    """The model as a ``ModelProto`` (``intake.proto``: onnx's class) without weight data: small initializers whole (shape
    inference needs Reshape targets and the like), large ones as headers (name, dtype, dims).
    For shape inference and graph rewriting, where ``onnx.load`` would copy every weight. Call
    ``load_model`` first: this assumes a file it accepted (a cap lowered since is its ``ModelError``)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped, \
            memoryview(mapped) as buf:
        try:
            return _parse(buf, keep_initializers=True).model
        except caps.CapExceeded as exc:  # raised below, once the frames holding views of the mapping are gone
            refused = exc.message()
    raise ModelError(f"{path}: {refused}")


# -- parsing without the weights ----------------------------------------------------------------------

@dataclass
class _Parsed:
    """What ``_parse`` read: the model (its graph without initializers unless asked for them), the
    headers of the top-level initializers, the top-level sparse initializers, and each buffer
    protobuf parsed with the message it holds (for the UTF-8 check and the external-data scan)."""

    model: ModelProto
    initializers: list[Initializer] = field(default_factory=list)
    sparse: list[SparseTensorProto] = field(default_factory=list)
    buffers: list[tuple[str, bytes]] = field(default_factory=list)
    nodes: int = 0  # counted so far: top-level graph, functions, training graphs (bodies: ``_build``)


def _parse(buf, keep_initializers: bool = False) -> _Parsed:
    """Protobuf's C parser reads everything but the weights. The model's and graph's fields are
    split at the wire level (``split_message`` costs no object per node); runs of ordinary fields
    and of small initializers go to protobuf in bulk, a large initializer as its header, and a
    field that could hide a large tensor (a node with a big Constant, a body with weights) is
    re-encoded without that tensor's data first."""
    top = split_message(buf, 0, len(buf), frozenset({_MODEL_GRAPH}), SMALL_TENSOR_BYTES)
    rest = _joined(buf, top, _MODEL, frozenset({_MODEL_GRAPH}))
    parsed = _Parsed(ModelProto.FromString(rest), buffers=[("ModelProto", rest)])
    nodes = sum(len(f.node) for f in parsed.model.functions)
    nodes += sum(len(t.initialization.node) + len(t.algorithm.node) for t in parsed.model.training_info)
    caps.check(caps.MAX_NODES, nodes)
    structure = len(rest)
    graph = parsed.model.graph  # parsed in place: copying a 20,000-node graph afterwards costs ~50 ms
    graph_fields = [f for f in top if isinstance(f, Field) and f.number == _MODEL_GRAPH and f.wire_type == LENGTH]
    if graph_fields:
        graph.SetInParent()
    for graph_field in graph_fields:
        nodes += _counted_nodes(buf, graph_field, nodes)
        pieces = split_message(buf, graph_field.value_start, graph_field.end, _GRAPH_WEIGHTS, SMALL_TENSOR_BYTES)
        _read_weights(buf, pieces, parsed, keep_initializers)
        data = _joined(buf, pieces, _GRAPH, _GRAPH_WEIGHTS)
        structure += len(data)
        caps.check(caps.MAX_GRAPH_BYTES, structure)
        graph.MergeFromString(data)
        parsed.buffers.append(("GraphProto", data))
    parsed.nodes = nodes
    return parsed


def _counted_nodes(buf, graph: Field, before: int) -> int:
    """The nodes of the top-level ``graph`` field, counted on the wire before protobuf parses them
    (``before``: nodes counted elsewhere); over ``MAX_NODES`` in all is ``CapExceeded`` as soon as
    the count passes it, so a 2 M-node file costs a fraction of a second and no memory."""
    limit = caps.MAX_NODES.limit()
    found = before + count_fields(buf, graph.value_start, graph.end, _GRAPH_NODE, max(limit - before, 0))
    caps.check(caps.MAX_NODES, found, at_least=True)
    return found - before


def _read_weights(buf, pieces: list[slice | Field], parsed: _Parsed, keep: bool) -> None:
    """The headers of a graph's initializers and sparse initializers, in file order (kept whole in
    the parsed graph when ``keep``). Runs of adjacent small initializers go to protobuf in one call,
    up to ``WEIGHT_BATCH_BYTES`` at a time so memory stays bounded; a large one is split first so
    its data is skipped."""
    batch: list[Field] = []
    for piece in [*pieces, None]:  # None: the end, which flushes the last batch
        weight = isinstance(piece, Field) and piece.wire_type == LENGTH and piece.number in _GRAPH_WEIGHTS
        small = weight and piece.number == _GRAPH_INITIALIZER and piece.end - piece.value_start <= SMALL_TENSOR_BYTES
        if small and batch and piece.start == batch[-1].end and piece.end - batch[0].start <= WEIGHT_BATCH_BYTES:
            batch.append(piece)
            continue
        if batch:
            tensors = GraphProto.FromString(buf[batch[0].start:batch[-1].end]).initializer
            parsed.initializers += [tensor_header(t) for t in tensors]
            if keep:
                parsed.model.graph.initializer.extend(tensors)
        batch = [piece] if small else []
        if weight and not small:
            _read_weight(buf, piece, parsed, keep)


def _read_weight(buf, piece: Field, parsed: _Parsed, keep: bool) -> None:
    """A large initializer (its header) or a sparse initializer (large tensors stripped)."""
    graph = parsed.model.graph
    if piece.number == _GRAPH_INITIALIZER:
        proto, string_bytes = _initializer_header(buf, piece.value_start, piece.end)
        parsed.initializers.append(tensor_header(proto, string_bytes))
        if keep:
            graph.initializer.append(proto)
        return
    data = _stripped(buf, piece.value_start, piece.end, _SPARSE)
    sparse = SparseTensorProto.FromString(data)
    parsed.sparse.append(sparse)
    parsed.buffers.append(("SparseTensorProto", data))
    parsed.initializers.append(sparse_header(sparse))
    if keep:
        graph.sparse_initializer.append(sparse)


def _stripped(buf, start: int, end: int, kind: int) -> bytes:
    """The ``kind`` message in ``buf[start:end]`` re-encoded without the data of any tensor over
    SMALL_TENSOR_BYTES (dims, dtype, name and external-data entries kept). A field this small
    cannot hold a large tensor and is copied as it is, so most messages are copied in one piece."""
    drop = _TENSOR_DATA_FIELDS if kind == _TENSOR else frozenset()
    return _joined(buf, split_message(buf, start, end, drop, SMALL_TENSOR_BYTES), kind, drop)


def _joined(buf, pieces: list[slice | Field], kind: int, drop: frozenset[int]) -> bytes:
    """The pieces of a ``kind`` message (``split_message``) put back together without the fields
    in ``drop``, each large field that may hold tensors stripped by ``_stripped``. A large field
    kept as it is holds a string or bytes: over ``MAX_STRING_BYTES`` it is ``CapExceeded``, and so
    is a result over ``MAX_GRAPH_BYTES``, both before anything is copied."""
    parts = []
    for piece in pieces:
        if isinstance(piece, slice):
            parts.append(buf[piece])
        elif piece.number not in drop:
            inner = _TENSOR_PATHS.get(kind, {}).get(piece.number)
            if inner is None or piece.wire_type != LENGTH:
                if piece.wire_type == LENGTH:  # a long doc string, say: no tensor inside
                    caps.check(caps.MAX_STRING_BYTES, piece.end - piece.value_start)
                parts.append(buf[piece.start:piece.end])
            else:
                parts.append(encode_length_delimited(piece.number, _stripped(buf, piece.value_start, piece.end, inner)))
    caps.check(caps.MAX_GRAPH_BYTES, sum(map(len, parts)))
    return b"".join(parts)


def _initializer_header(buf, start: int, end: int) -> tuple[TensorProto, int]:
    """The large initializer at ``buf[start:end]`` without its data, and the byte size of any
    string data skipped."""
    pieces = split_message(buf, start, end, _TENSOR_DATA_FIELDS, SMALL_TENSOR_BYTES)
    header = TensorProto.FromString(_joined(buf, pieces, _TENSOR, _TENSOR_DATA_FIELDS))
    strings = sum(p.end - p.value_start for p in pieces if isinstance(p, Field) and p.number == _TENSOR_STRING_DATA)
    return header, strings


# -- refusals that need the parsed model --------------------------------------------------------------

def _check_text(model_path: Path, parsed: _Parsed) -> None:
    """Every string field protobuf parsed, and every initializer name, is valid UTF-8: protobuf
    hands out ``bytes`` for one that is not, and no name may be ``bytes``."""
    if all(utf8.is_valid(message, data) for message, data in parsed.buffers):
        found = next((("initializer name", i.name) for i in parsed.initializers if not isinstance(i.name, str)), None)
    else:  # the slow walk that says where, only now that it is needed
        found = utf8.first_invalid(parsed.model) or next(
            filter(None, (utf8.first_invalid(s, "graph.sparse_initializer") for s in parsed.sparse)),
            ("a text field", b""))
    if found is not None:
        where, value = found
        raise ModelError(f"{model_path}: {where} is not valid UTF-8 ({value[:40]!r}); the file is corrupt or "
                         "hostile, refusing it")


def _check_external_locations(model_path: Path, parsed: _Parsed) -> None:
    """One rule (``location_problem``) for every tensor that names an external-data file: the
    top-level initializers (from their headers) and sparse initializers, and, when a "location"
    key appears anywhere in what protobuf parsed, every tensor in nodes, bodies and functions."""
    base = model_path.resolve().parent
    located = [(f"initializer {i.name!r}", i.external_location) for i in parsed.initializers
               if i.external_location is not None]
    for sparse in parsed.sparse:
        what = f"sparse initializer {sparse.values.name!r}"
        located += [(what, tensor_header(t).external_location) for t in (sparse.values, sparse.indices)]
    if any(_LOCATION_KEY in data for _, data in parsed.buffers):
        located += [(what, tensor_header(t).external_location) for what, t in _nested_tensors(parsed.model)]
    for what, location in located:
        problem = None if location is None else location_problem(base, location)
        if problem:
            raise ModelError(f"{model_path}: {what} points to external data at {location!r}, {problem}; "
                             "refusing to read it")


def location_problem(base: Path, location: str | bytes) -> str | None:
    """Why an external-data ``location`` is refused, or None: it must be a relative path that stays
    inside the model's folder ``base`` (no absolute path, drive letter, ``..`` escape, symlink
    escape or NUL byte) and be text."""
    if not isinstance(location, str):
        return "which is not valid UTF-8"
    if "\0" in location:
        return "which holds a NUL byte"
    if not location or os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
        return "which is not a relative path inside the model's folder"
    try:
        target = (base / location).resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        return "which cannot be resolved (a symlink loop)"
    if os.path.commonpath([base, target]) != str(base):
        return "outside the model's folder"
    return None


def _nested_tensors(model: ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """Every tensor held below the top-level initializers: in the graph's nodes and their bodies,
    in functions (node attributes and attribute defaults) and in training graphs, each with where
    it sits."""
    yield from _graph_tensors(model.graph, "")
    for function in model.functions:
        where = f" in function {function.name!r}"
        yield from _node_tensors(function.node, where)
        for attribute in function.attribute_proto:
            yield from _attribute_tensors(attribute, f"default of attribute {attribute.name!r}{where}")
    for number, info in enumerate(model.training_info):
        yield from _graph_tensors(info.initialization, f" in training initialization {number}")
        yield from _graph_tensors(info.algorithm, f" in training algorithm {number}")


def _graph_tensors(graph: GraphProto, where: str) -> Iterator[tuple[str, TensorProto]]:
    for tensor in graph.initializer:
        yield f"initializer {tensor.name!r}{where}", tensor
    for sparse in graph.sparse_initializer:
        what = f"sparse initializer {sparse.values.name!r}{where}"
        yield from ((what, sparse.values), (what, sparse.indices))
    yield from _node_tensors(graph.node, where)


def _node_tensors(nodes, where: str) -> Iterator[tuple[str, TensorProto]]:
    for node in nodes:
        for attribute in node.attribute:
            yield from _attribute_tensors(attribute, f"attribute {attribute.name!r} of node {node.name!r}{where}")


def _attribute_tensors(attribute: AttributeProto, what: str) -> Iterator[tuple[str, TensorProto]]:
    """Every tensor the attribute holds, whatever type it declares (a runtime may not look)."""
    tensors = [attribute.t] if attribute.HasField("t") else []
    tensors += attribute.tensors
    sparse = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
    for item in [*sparse, *attribute.sparse_tensors]:
        tensors += (item.values, item.indices)
    yield from ((what, tensor) for tensor in tensors)
    graphs = [attribute.g] if attribute.HasField("g") else []
    for graph in [*graphs, *attribute.graphs]:
        yield from _graph_tensors(graph, f" inside {what}")


# -- the data model --------------------------------------------------------------------------------------
METADATA_ENTRIES, METADATA_CHARS = 64, 1024  # a class list of thousands of characters is not kept whole


def _build(path: Path, size: int, parsed: _Parsed) -> ModelGraph:
    model = parsed.model
    graph = model.graph
    opsets = {op.domain or "": op.version for op in model.opset_import}
    if "ai.onnx" in opsets and "" not in opsets:
        opsets[""] = opsets.pop("ai.onnx")
    nodes = build_nodes(graph.node)
    caps.check(caps.MAX_NODES, parsed.nodes + sum(_body_nodes(n.proto) for n in nodes if n.subgraphs))
    listed_inputs = [value_spec(v) for v in graph.input]
    built = ModelGraph(
        path=str(path),
        file_bytes=size,
        ir_version=model.ir_version,
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        opsets=opsets,
        graph_name=graph.name,
        listed_inputs=listed_inputs,
        outputs=[value_spec(v) for v in graph.output],
        nodes=nodes,
        initializers={i.name: i for i in parsed.initializers},
        value_info={v.name: value_spec(v) for v in graph.value_info},
        topo_order=[],
        warnings=_compatibility_warnings(model, opsets, nodes),
        metadata={p.key: p.value[:METADATA_CHARS] for p in list(model.metadata_props)[:METADATA_ENTRIES]},
    )
    built.topo_order = _topological_order(path, built)
    _check_outputs(path, built)
    return built


def _body_nodes(node: NodeProto) -> int:
    """The nodes inside ``node``'s control-flow bodies, at any depth, counted on the parsed protos
    (before any body is built: bodies are built on first access)."""
    graphs = [g for a in node.attribute for g in ([a.g] if a.HasField("g") else []) + list(a.graphs)]
    return sum(len(g.node) + sum(_body_nodes(n) for n in g.node if n.attribute) for g in graphs)


def _check_outputs(path: Path, graph: ModelGraph) -> None:
    """A model must declare an output, and each one must come from a node, a graph input or an
    initializer: else ONNX Runtime refuses it at session creation, in words about its own sources."""
    if not graph.outputs:
        raise ModelError(f"{path}: the graph declares no outputs (nothing could be computed); re-export it")
    known = graph.producers.keys() | {v.name for v in graph.listed_inputs} | graph.initializers.keys()
    missing = next((o.name for o in graph.outputs if o.name not in known), None)
    if missing is not None:
        raise ModelError(f"{path}: graph output {missing!r} is produced by no node, graph input or initializer "
                         "(dangling output)")


def _compatibility_warnings(model: ModelProto, opsets: dict[str, int], nodes: list[Node]) -> list[str]:
    warnings = []
    if model.ir_version > proto.IR_VERSION:
        warnings.append(f"IR version {model.ir_version} is newer than this onnx package knows ({proto.IR_VERSION})")
    latest = proto.LATEST_OPSET
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


def _topological_order(path: Path, graph: ModelGraph) -> list[int]:
    """Kahn's algorithm over top-level nodes, on the graph's own producer/consumer index; refuses
    cycles and inputs nothing produces. A node waits for one edge per input slot; of the nodes a
    finished node makes ready, the lower index goes first (a depth-first order, as before the
    index existed)."""
    nodes, producers, consumers = graph.nodes, graph.producers, graph.consumers
    graph_inputs = {v.name for v in graph.listed_inputs} | set(graph.initializers)
    waiting = [0] * len(nodes)
    for name, readers in consumers.items():  # in the order nodes first read each tensor
        if name in producers:
            for reader in readers:
                waiting[reader.index] += 1
        elif name not in graph_inputs:
            raise ModelError(f"{path}: node {readers[0].name!r} reads tensor {name!r}, which no node, graph "
                             "input or initializer provides (dangling reference)")
    ready = [n.index for n in reversed(nodes) if not waiting[n.index]]
    order: list[int] = []
    while ready:
        current = nodes[ready.pop()]
        order.append(current.index)
        now_ready = []
        for name in current.outputs:
            for reader in consumers.get(name, ()):
                waiting[reader.index] -= 1
                if not waiting[reader.index]:
                    now_ready.append(reader.index)
        if len(now_ready) > 1 and len(current.outputs) > 1:
            now_ready.sort()  # readers of different outputs: lower index first, as for a single output
        ready += now_ready
    if len(order) != len(nodes):
        stuck = next(n.name for n in nodes if waiting[n.index] > 0)
        raise ModelError(f"{path}: the graph has a cycle (node {stuck!r} depends on its own output)")
    return order
