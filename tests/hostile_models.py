"""Hostile models for the memory caps, written straight on the protobuf wire.

Why not ``onnx.helper``: building 2 M ``NodeProto`` objects in Python takes minutes and gigabytes,
which is the very cost the reader's caps are there to refuse; the bytes here are put together with
``bytes.join`` in a few seconds and the smallest possible memory. ``huge_string_model`` writes its
attribute's payload in chunks, so a 1 GB string never sits in the test's memory.

The chain is valid ONNX (``onnx.checker`` accepts a small one); the string model is well-formed
(the checker only objects that Identity has no attribute ``note``). The reader would accept both
but for their size.
"""

from __future__ import annotations

from pathlib import Path

from dashboard.intake.wire import encode_length_delimited as _field
from dashboard.intake.wire import encode_varint

# onnx.proto field numbers
_MODEL_IR, _MODEL_OPSET, _MODEL_GRAPH = 1, 8, 7
_GRAPH_NODE, _GRAPH_NAME, _GRAPH_INPUT, _GRAPH_OUTPUT = 1, 2, 11, 12
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTRIBUTE = 1, 2, 3, 4, 5
_ATTR_NAME, _ATTR_S, _ATTR_TYPE = 1, 4, 20
_STRING_TYPE = 3


def _varint_field(number: int, value: int) -> bytes:
    return encode_varint(number << 3) + encode_varint(value)


def _value_info(name: str) -> bytes:
    """A float tensor of shape [1]: ValueInfoProto{name, type{tensor_type{elem_type, shape}}}."""
    dim = _field(1, _varint_field(1, 1))
    tensor = _varint_field(1, 1) + _field(2, dim)
    return _field(1, name.encode()) + _field(2, _field(1, tensor))


def _model(graph_fields: list[bytes], head: bytes = b"") -> list[bytes]:
    """The pieces of a ModelProto around a graph whose fields are ``graph_fields`` (IR 8, opset 17)."""
    graph_length = sum(map(len, graph_fields))
    opset = _field(_MODEL_OPSET, _field(1, b"") + _varint_field(2, 17))
    return [_varint_field(_MODEL_IR, 8), opset, head, encode_varint(_MODEL_GRAPH << 3 | 2),
            encode_varint(graph_length), *graph_fields]


def _name(index: int) -> bytes:
    """Short tensor names (base 36), so the file is as small per node as an exporter's."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        index, rest = divmod(index, 36)
        out = digits[rest] + out
        if not index:
            return out.encode()


def relu_chain(path: Path, nodes: int) -> Path:
    """``x -> Relu -> Relu ... -> y``: ``nodes`` named Relu nodes in a chain (about 27 bytes
    each: 2 M nodes make a 54 MB file, the issue's)."""
    relu = _field(_NODE_OP, b"Relu")
    names = [_name(i) for i in range(nodes + 1)]
    body = [_field(_GRAPH_NODE, _field(_NODE_INPUT, names[i]) + _field(_NODE_OUTPUT, names[i + 1])
                   + _field(_NODE_NAME, b"r" + names[i + 1]) + relu) for i in range(nodes)]
    body += [_field(_GRAPH_NAME, b"relu_chain"), _field(_GRAPH_INPUT, _value_info(names[0].decode())),
             _field(_GRAPH_OUTPUT, _value_info(names[-1].decode()))]
    path.write_bytes(b"".join(_model(body)))
    return path


def huge_string_model(path: Path, string_bytes: int, chunk: int = 16 << 20, sparse: bool = False) -> Path:
    """One Identity node with a STRING attribute ``note`` of ``string_bytes`` bytes of ``a``,
    written in chunks (a 1 GB attribute costs the test 16 MB); with ``sparse``, the string is a
    hole in the file (NUL bytes that take no disk and no time to write)."""
    attr_head = _field(_ATTR_NAME, b"note") + _varint_field(_ATTR_TYPE, _STRING_TYPE)
    attr_head += encode_varint(_ATTR_S << 3 | 2) + encode_varint(string_bytes)
    attr_length = len(attr_head) + string_bytes
    node_head = _field(_NODE_INPUT, b"x") + _field(_NODE_OUTPUT, b"y") + _field(_NODE_OP, b"Identity")
    node_head += encode_varint(_NODE_ATTRIBUTE << 3 | 2) + encode_varint(attr_length) + attr_head
    node_length = len(node_head) + string_bytes
    graph_tail = _field(_GRAPH_NAME, b"huge_string") + _field(_GRAPH_INPUT, _value_info("x"))
    graph_tail += _field(_GRAPH_OUTPUT, _value_info("y"))
    node_tag = encode_varint(_GRAPH_NODE << 3 | 2) + encode_varint(node_length)
    graph_length = len(node_tag) + node_length + len(graph_tail)
    opset = _field(_MODEL_OPSET, _field(1, b"") + _varint_field(2, 17))
    head = _varint_field(_MODEL_IR, 8) + opset + encode_varint(_MODEL_GRAPH << 3 | 2) + encode_varint(graph_length)
    with open(path, "wb") as out:
        out.write(head + node_tag + node_head)
        block = b"a" * min(chunk, max(string_bytes, 1))
        left = 0 if sparse else string_bytes
        if sparse:
            out.seek(string_bytes, 1)
        while left:
            out.write(block[:left])
            left -= min(left, len(block))
        out.write(graph_tail)
    return path
