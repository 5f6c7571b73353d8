"""Values for symbolic dimensions, and the tensor shapes they imply.

QNN compiles static graphs: with a symbolic ``batch_size`` or ``sequence_length`` left open the EP
answers "Cannot get shape" for almost every node and claims next to nothing. So every analysis
fixes each symbolic dimension of the graph inputs (``add_free_dimension_override_by_name``). This
module proposes a value for each name (the user overrides any of them) and, once they are fixed,
infers the shape of every tensor, which is what the migration plans need to price the tensors
that cross a segment boundary.

A dimension without a name (shown as ``?``) cannot be overridden by name. For those the user gives
the whole input shape (``input=1,576``), and the sessions get a copy of the model whose input
declares it, as onnxruntime's ``make_dynamic_shape_fixed`` tool does (``rewritten_model``). The
copy is made at the protobuf wire level from the file: nothing is parsed but the inputs (and the
names of renamed nodes), and external weights stay where they are.

Defaults, by what the name says (case-insensitive, ``_``/``-`` ignored):

==========================================  =======  ==========================================
dimension name looks like                   value    why
==========================================  =======  ==========================================
batch, batch_size, N, bs, b                 1        on-device inference serves one request
sequence_length, seq_len, tokens …          1 / 128  1 for a decoder with a KV cache (one decode
                                                     step), 128 for encoders and prefill
past_sequence_length, past_seq_len …        127      one token short of ``total``
total_sequence_length, max_seq_len …        128      ``past + sequence`` for a decode step
height/width, H/W, image_size …             224      the usual vision input
frames, time, num_frames, audio_length …    3000     30 s of 10 ms log-mel frames (Whisper)
anything else                               1        flagged as a guess
==========================================  =======  ==========================================

What the model says about itself then wins (``shape_hints.prefill``): an image size in its
metadata or file name, an OCR recogniser's line (48×320), an encoder's length in a decoder (1500
for Whisper, else 128; never one decode step).

Shape inference is ONNX Runtime's own, as it resolves the graph: a CPU session on a weight-free
copy of the model in which every tensor is a graph output (``session.get_outputs()`` then states
each one's type and shape), which knows the ``com.microsoft`` contrib ops of GenAI models and costs
no ``import onnx`` (for graphs up to ``RUNTIME_INFERENCE_NODES``; larger ones go straight to
ONNX's inference, which is then cheaper). Where it leaves a tensor short of a static shape, ONNX's inference (with data
propagation) fills in what it knows, and ONNX Runtime's symbolic shape inference
(``onnxruntime.tools``) is the last resort; those two import onnx, and run only then. A shape that
stays unknown or symbolic is reported as such (``TensorShape.nbytes`` is None), never guessed.
"""

from __future__ import annotations

import mmap
import os
import re
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph, dtype_bits, dtype_name
from dashboard.intake.proto import ModelProto, TensorProto, ValueInfoProto
from dashboard.intake.wire import LENGTH, encode_length_delimited, rewrite_message
from dashboard.serde import Record

DEFAULT_BATCH = 1
DEFAULT_SEQUENCE = 128
DEFAULT_DECODE_SEQUENCE = 1
DEFAULT_IMAGE = 224
DEFAULT_FRAMES = 3000

_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^(batch|batchsize|bs|b|n|nbatch|numbatch)$"), "batch"),
    (re.compile(r"past.*(seq|len)|pastlen|cachelen|pastkeylen"), "past"),
    (re.compile(r"^(total|max|kv).*(seq|len)|totalseq|maxlength"), "total"),
    (re.compile(r"(seq|sequence|tokens?|ntoken|textlen|inputlen|length|len)"), "sequence"),
    (re.compile(r"^(h|w|height|width|imgh|imgw|imageh|imagew|imagesize|size|inputh|inputw)$"), "image"),
    (re.compile(r"(height|width)"), "image"),
    (re.compile(r"(frame|time|audio|samples|mel)"), "frames"),
]


@dataclass(frozen=True)
class DimDefault:
    """A proposed value for one symbolic dimension, with the reason shown next to it."""

    name: str
    value: int
    why: str
    guessed: bool = False


def dim_kind(name: str) -> str | None:
    """What a symbolic dimension's name says it is: ``batch``, ``past``, ``total``, ``sequence``,
    ``image``, ``frames``, or None (the rules above)."""
    return _kind(name)


def _kind(name: str) -> str | None:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for pattern, kind in _RULES:
        if pattern.search(key):
            return kind
    return None


def has_kv_cache(graph: ModelGraph) -> bool:
    """A decoder that feeds past key/values back in (then one decode step is the default)."""
    names = [t.name.lower() for t in graph.inputs]
    return any("past" in n and ("key" in n or "value" in n or n.startswith("past")) for n in names)


def symbolic_dims(graph: ModelGraph) -> list[str]:
    """Symbolic dimension names of the graph inputs, in first-seen order: the only dimensions a
    user (or a session's free-dimension override) can set. Why not the outputs': theirs are
    derived from the inputs' (exporters write expressions such as ``floor(height/2 - 1/2)``,
    ``past_sequence_length + 1`` or ``Softmax4195_dim_0``), so offering them as settings asks for
    values the model computes itself."""
    seen: dict[str, None] = {}
    for spec in graph.inputs:
        for dim in spec.shape or ():
            if isinstance(dim, str) and dim:
                seen.setdefault(dim, None)
    return list(seen)


def unnamed_dynamic_inputs(graph: ModelGraph, shapes: dict[str, tuple[int, ...]] | None = None) -> list[str]:
    """Inputs with a dimension that has no name (``?``), other than those ``shapes`` fixes: no
    override by name can fix them, only a whole input shape."""
    return [t.name for t in graph.inputs if (t.shape is None or any(d is None for d in t.shape))
            and t.name not in (shapes or {})]


def default_dims(graph: ModelGraph) -> dict[str, DimDefault]:
    """A proposed value for every symbolic dimension of the graph's inputs."""
    decoder = has_kv_cache(graph)
    out: dict[str, DimDefault] = {}
    for name in symbolic_dims(graph):
        kind = _kind(name)
        if kind == "batch":
            out[name] = DimDefault(name, DEFAULT_BATCH, "batch: one request at a time")
        elif kind == "past":
            out[name] = DimDefault(name, DEFAULT_SEQUENCE - 1, "past tokens in the KV cache (total - 1)")
        elif kind == "total":
            out[name] = DimDefault(name, DEFAULT_SEQUENCE, "KV cache length after this step (past + 1)")
        elif kind == "sequence":
            if decoder:
                out[name] = DimDefault(name, DEFAULT_DECODE_SEQUENCE, "one decode step of a KV-cache decoder")
            else:
                out[name] = DimDefault(name, DEFAULT_SEQUENCE, "sequence length of an encoder / prefill")
        elif kind == "image":
            out[name] = DimDefault(name, DEFAULT_IMAGE, "image side of a typical vision input")
        elif kind == "frames":
            out[name] = DimDefault(name, DEFAULT_FRAMES, "30 s of 10 ms audio frames")
        else:
            out[name] = DimDefault(name, 1, "no rule for this name: 1 is a guess, set it", guessed=True)
    # What the model says about itself wins over what its dimension names suggest: an image size
    # in its metadata or name, an OCR line's width, an encoder's length (``shape_hints.prefill``).
    from dashboard.intake.shape_hints import prefill

    for name, (value, why) in prefill(graph).items():
        if name in out and out[name].value != value and _kind(name) != "batch":
            out[name] = DimDefault(name, value, why)
    return out


def check_dims(dims: dict[str, int]) -> None:
    """Dimension overrides must be positive integers (bools are ints in Python: refused)."""
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise UserError(f"dimension {name!r} must be a positive integer, got {value!r}")


def parse_shapes(items: list[str], what: str = "--shape") -> dict[str, tuple[int, ...]]:
    """``["NAME=1,576", ...]`` from the command line or a page field: an input's whole shape. The
    last ``=`` separates, since input names may hold one and shapes never do."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise UserError(f"{what} {item!r} is not NAME=D1,D2,... (an input and its whole shape)")
        out[name] = parse_shape(value, f"{what} {name!r}")
    return out


def parse_shape(text: str, what: str) -> tuple[int, ...]:
    """``"1, 576"`` as ``(1, 576)``; every dimension a positive integer."""
    dims = []
    for part in text.replace("x", ",").split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0:
            raise UserError(f"{what}: every dimension must be a positive integer, got {part or '(empty)'!r} "
                            f"in {text.strip()!r}")
        dims.append(int(part))
    return tuple(dims)


def check_input_shapes(graph: ModelGraph, shapes: dict[str, tuple[int, ...]], dims: dict[str, int]) -> None:
    """Each overridden input exists, keeps its rank and its fixed dimensions, and agrees with the
    value its named dimensions get (``dims``): a contradiction would compile a graph whose inputs
    disagree with each other."""
    inputs = {t.name: t for t in graph.inputs}
    for name, shape in shapes.items():
        spec = inputs.get(name)
        if spec is None:
            known = ", ".join(list(inputs)[:6])
            raise UserError(f"the model has no input {name!r} to give a shape (inputs: {known})")
        if spec.shape is None:
            continue
        if len(spec.shape) != len(shape):
            raise UserError(f"input {name!r} has rank {len(spec.shape)} ({spec.shape_text()}); the shape given "
                            f"has {len(shape)} dimension(s)")
        for i, (declared, value) in enumerate(zip(spec.shape, shape)):
            if isinstance(declared, int) and declared >= 0 and declared != value:
                raise UserError(f"input {name!r} has dimension {i} fixed to {declared} in the model, not {value}")
            if isinstance(declared, str) and declared in dims and dims[declared] != value:
                raise UserError(f"input {name!r}: dimension {i} is {declared!r}, which is {dims[declared]}; "
                                f"set {declared!r} to {value} instead, or give {dims[declared]}")


def fix_input_shapes(model, shapes: dict[str, tuple[int, ...]]) -> None:
    """Declare ``shapes`` on the inputs of ``model`` (a ``ModelProto``), in place."""
    for value in model.graph.input:
        if value.name in shapes:
            _set_shape(value, shapes[value.name])


def _set_shape(value, shape: tuple[int, ...]) -> None:
    tensor = value.type.tensor_type
    tensor.shape.ClearField("dim")
    for size in shape:
        tensor.shape.dim.add().dim_value = int(size)


# GraphProto / NodeProto / ValueInfoProto / ModelProto field numbers (onnx.proto).
_MODEL_GRAPH, _GRAPH_NODE, _GRAPH_INPUT, _NODE_NAME = 7, 1, 11, 3


def rewritten_model(path: str | os.PathLike, shapes: dict[str, tuple[int, ...]] | None = None,
                    node_names: list[str] | None = None) -> bytes:
    """The model file at ``path`` with ``shapes`` declared on its inputs and, when ``node_names``
    is given, every node renamed in graph order. Everything else is copied byte for byte (weights
    included when they are in the file; external ones stay referenced, so a session given these
    bytes reads them from the original folder)."""
    shapes = shapes or {}
    names = iter(node_names) if node_names is not None else None

    def node(buf, f) -> bytes:
        body = rewrite_message(buf, f.value_start, f.end, frozenset({_NODE_NAME}), lambda name: b"")
        return encode_length_delimited(_GRAPH_NODE, body + encode_length_delimited(_NODE_NAME, next(names).encode()))

    def graph_input(buf, f) -> bytes | None:
        value = ValueInfoProto.FromString(bytes(buf[f.value_start:f.end]))
        if value.name not in shapes:
            return None
        _set_shape(value, shapes[value.name])
        return encode_length_delimited(_GRAPH_INPUT, value.SerializeToString())

    def graph_field(buf, f) -> bytes | None:
        if f.wire_type != LENGTH:
            return None
        return node(buf, f) if f.number == _GRAPH_NODE and names is not None else graph_input(buf, f) \
            if f.number == _GRAPH_INPUT else None

    def graph(buf, g) -> bytes | None:
        if g.wire_type != LENGTH:
            return None
        body = rewrite_message(buf, g.value_start, g.end, frozenset({_GRAPH_NODE, _GRAPH_INPUT}),
                               lambda f: graph_field(buf, f))
        return encode_length_delimited(_MODEL_GRAPH, body)

    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return rewrite_message(buf, 0, len(buf), frozenset({_MODEL_GRAPH}), lambda g: graph(buf, g))


def is_float_model(graph: ModelGraph) -> bool:
    """Float inputs or float32 weights: the models HTP runs in fp16 (pre-set on the pages)."""
    return any(t.dtype in ("float32", "float64") for t in graph.inputs) or any(
        i.dtype == "float32" for i in graph.initializers.values())


def resolve_dims(graph: ModelGraph, overrides: dict[str, int] | None) -> dict[str, int]:
    """Defaults for every symbolic dimension, with the user's ``overrides`` on top (overrides for
    names the graph does not have are kept: they may name internal dims)."""
    dims = {name: d.value for name, d in default_dims(graph).items()}
    dims.update(overrides or {})
    return dims


@dataclass(frozen=True)
class TensorShape(Record):
    """Inferred dtype and shape of one tensor after the dimension overrides."""

    dtype: str
    shape: tuple[int | str | None, ...] | None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def nbytes(self) -> int | None:
        """Bytes of the tensor, or None when a dimension is unknown or the dtype has no fixed size."""
        if not self.is_static:
            return None
        bits = _BITS_BY_NAME.get(self.dtype, 0)
        if not bits:
            return None
        count = 1
        for dim in self.shape:
            count *= dim
        return (count * bits + 7) // 8

    def text(self) -> str:
        if self.shape is None:
            return f"{self.dtype}[?]"
        return f"{self.dtype}[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"



_BITS_BY_NAME = {dtype_name(code): dtype_bits(code) for code in range(1, 26)}


def _fix_io_dims(model, dims: dict[str, int]) -> None:
    for value in (*model.graph.input, *model.graph.output):
        tensor = value.type.tensor_type
        if not tensor.HasField("shape"):
            continue
        for dim in tensor.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in dims:
                dim.dim_value = int(dims[dim.dim_param])


def _collect(model) -> dict[str, TensorShape]:
    out: dict[str, TensorShape] = {}
    graph = model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        tensor = value.type.tensor_type
        if value.type.WhichOneof("value") != "tensor_type":
            continue
        shape = None
        if tensor.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
        out[value.name] = TensorShape(dtype_name(tensor.elem_type), shape)
    for init in graph.initializer:
        out[init.name] = TensorShape(dtype_name(init.data_type), tuple(int(d) for d in init.dims))
    return out


# Up to this many top-level nodes, ONNX Runtime's inference goes first. Its session costs grow
# faster than the graph (decoders measured on this shared 2-core machine: 0.1 s at 500 nodes, 0.6 s
# at 2,000, 2.5 s at 5,000, 7 to 10 s at 20,000; onnx's inference 0.02 to 0.3 s): past 2,000 nodes,
# importing onnx (about a second) is the cheaper way, and small next to compiling such a graph.
RUNTIME_INFERENCE_NODES = 2000


def infer_tensor_shapes(model, dims: dict[str, int]) -> tuple[dict[str, TensorShape], str]:
    """Shapes of every tensor of ``model`` (a ``ModelProto``, weights may be absent) with the
    graph's symbolic dims fixed to ``dims``. Returns the shapes and which inference produced them.
    ``model`` is modified (its input/output dims are fixed)."""
    _fix_io_dims(model, dims)
    declared = _collect(model)
    produced = [t for node in model.graph.node for t in node.output if t]
    shapes, source = declared, "declared shapes only (inference failed)"
    if len(model.graph.node) <= RUNTIME_INFERENCE_NODES:
        try:
            shapes, source = {**declared, **runtime_shapes(model, dims)}, "onnxruntime shape inference"
        except Exception:  # noqa: BLE001 - ORT refuses graphs it cannot resolve (custom ops, bad types)
            pass
        if all(t in shapes and shapes[t].is_static for t in produced):
            return shapes, source
    shapes, more = _onnx_inferred(model, shapes, produced)
    if not more:
        return shapes, source
    return shapes, f"{source} + {more}" if source == "onnxruntime shape inference" and more.startswith("onnx ") else more


def runtime_shapes(model, dims: dict[str, int]) -> dict[str, TensorShape]:
    """Every top-level tensor's type and shape as ONNX Runtime infers them while it resolves the
    graph (a CPU session, optimizations off, the free-dimension overrides ``dims``), on a copy of
    ``model`` in which each initializer without its data (a weight header) is a graph input of
    its dtype and dims, and every node output is a graph output. Raises what ORT raises."""
    import onnxruntime as ort

    probe = ModelProto()
    probe.CopyFrom(model)
    graph = probe.graph
    listed = {v.name for v in graph.input}
    kept = []
    for tensor in graph.initializer:
        if _has_data(tensor):
            kept.append(tensor)
        elif tensor.name not in listed:
            _declare_input(graph, tensor.name, tensor.data_type, tensor.dims)
    for sparse in graph.sparse_initializer:
        if sparse.values.name not in listed:
            _declare_input(graph, sparse.values.name, sparse.values.data_type, sparse.dims)
    graph.ClearField("initializer")
    graph.ClearField("sparse_initializer")
    graph.initializer.extend(kept)
    exposed = {v.name for v in graph.output} | listed
    for node in graph.node:
        for name in node.output:
            if name and name not in exposed:
                exposed.add(name)
                graph.output.add().name = name
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    # Nothing runs: no thread pool to start, no memory to plan (it runs beside a QNN compile).
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = options.enable_mem_pattern = False
    for name, value in dims.items():
        options.add_free_dimension_override_by_name(name, int(value))
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    out = {}
    for arg in session.get_outputs():
        if arg.type.startswith("tensor(") and arg.shape is not None:
            element = arg.type[len("tensor("):-1]
            shape = tuple(d if isinstance(d, (int, str)) and d != -1 else None for d in arg.shape)
            out[arg.name] = TensorShape(_ORT_TYPES.get(element, element), shape)
    return out


_ORT_TYPES = {"float": "float32", "double": "float64"}  # ORT's element names that differ from dtype_name's
_DATA_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _has_data(tensor) -> bool:
    """Whether the tensor's values are in the message (not stripped by the reader, not external)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        return False
    return tensor.HasField("raw_data") or any(len(getattr(tensor, f)) for f in _DATA_FIELDS)


def _declare_input(graph, name: str, elem_type: int, dims) -> None:
    value = graph.input.add()
    value.name = name
    value.type.tensor_type.elem_type = elem_type
    _set_shape(value, tuple(dims))


def _onnx_inferred(model, shapes: dict[str, TensorShape], produced: list[str]) -> tuple[dict[str, TensorShape], str]:
    """``shapes`` completed by ONNX's shape inference (each tensor keeps the more static of the
    two), then, if a produced tensor still has no rank, by ORT's symbolic inference; with the name
    of what helped. Both import onnx (and the second sympy): they run only where needed."""
    import onnx

    source = ""
    try:
        inferred = _collect(onnx.shape_inference.infer_shapes(model, data_prop=True))
        shapes = {**inferred, **{k: v for k, v in shapes.items() if _static_dims(v) >= _static_dims(inferred.get(k))}}
        source = "onnx shape inference"
    except Exception:  # noqa: BLE001 - onnx raises several error types on graphs it cannot follow
        pass
    if all(t in shapes and shapes[t].shape is not None for t in produced):
        return shapes, source
    # ONNX does not know the com.microsoft contrib ops of GenAI models; ORT's symbolic inference
    # does, at the cost of importing sympy, so it runs only when a rank is still unknown.
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        with _scratch_cwd():
            inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True, guess_output_rank=False)
        if inferred is not None:
            return _collect(inferred), "onnxruntime symbolic shape inference"
    except Exception:  # noqa: BLE001 - it raises bare Exceptions on graphs it cannot follow
        pass
    return shapes, source


def _static_dims(shape: TensorShape | None) -> int:
    """How much a shape says: -1 for none, else its rank plus one per fixed dimension."""
    if shape is None or shape.shape is None:
        return -1
    return len(shape.shape) + sum(isinstance(d, int) and d >= 0 for d in shape.shape)


_CWD_LOCK = threading.Lock()


@contextmanager
def _scratch_cwd() -> Iterator[None]:
    """Run in an empty temporary working directory, removed afterwards. ORT's symbolic inference
    saves ``sym_shape_infer_temp.onnx`` (and its weights) into the working directory whenever it
    cannot infer every shape, which would litter the project folder. The working directory is
    process-wide, so callers are serialised; the one caller (the partition worker) uses absolute
    paths everywhere else."""
    with _CWD_LOCK, tempfile.TemporaryDirectory(prefix="qbl-shapes-") as scratch:
        previous = os.getcwd()
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(previous)
