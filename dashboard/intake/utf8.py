"""Is every string field of a serialized ONNX message valid UTF-8? Answered by protobuf's C parser.

Why: ``onnx.proto`` is proto2, whose parser accepts any bytes in a ``string`` field; protobuf's
Python API then returns ``bytes`` instead of ``str`` for a field that does not decode, and a name
that is ``bytes`` breaks every join, comparison and JSON dump downstream. Checking each name in
Python would cost a pass over every node, attribute and body. A proto3 parser rejects invalid
UTF-8 in ``string`` fields while it parses, so this module builds a proto3 twin of ``onnx.proto``
(same messages and field numbers, its own descriptor pool, so nothing clashes with ``onnx``) and
parses the same bytes with it: one C-speed pass over everything the reader hands to protobuf.
``bytes`` fields (attribute strings, tensor data) are not text and stay unchecked, as in ONNX.
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from dashboard.intake import proto

_PACKAGE = "qnn_lab_utf8_check"


@lru_cache(maxsize=None)
def _twin(message_name: str) -> type[Message]:
    """The proto3 twin of ``onnx.<message_name>``."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{message_name}"))


@lru_cache(maxsize=1)
def _pool() -> descriptor_pool.DescriptorPool:
    source = descriptor_pb2.FileDescriptorProto.FromString(proto.SERIALIZED)
    source.name, source.package, source.syntax = f"{_PACKAGE}.proto", _PACKAGE, "proto3"
    source.ClearField("options")
    pending = list(source.message_type)
    while pending:
        message = pending.pop()
        pending.extend(message.nested_type)
        for field in message.field:
            if field.type_name.startswith(".onnx."):
                field.type_name = f".{_PACKAGE}." + field.type_name[len(".onnx."):]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(source)
    return pool


def is_valid(message_name: str, data: bytes) -> bool:
    """True when every ``string`` field of the ``onnx.<message_name>`` in ``data`` (at any depth)
    is valid UTF-8. ``data`` must already parse as that message."""
    try:
        _twin(message_name).FromString(data)
    except DecodeError as exc:
        if "alloc failed" in str(exc):  # protobuf's arena out of memory: the machine's limit, not the text
            raise MemoryError(str(exc)) from None
        return False
    return True


def first_invalid(message: Message, path: str = "") -> tuple[str, bytes] | None:
    """The first ``string`` field that is not valid UTF-8 in a parsed (proto2) message: where it
    sits (a path such as ``graph.node[12].input[0]``) and its bytes; None if there is none. A slow
    walk, for the error message only: protobuf returns such a field as ``bytes``."""
    for field, value in message.ListFields():
        name = f"{path}.{field.name}" if path else field.name
        values = list(value) if field.is_repeated else [value]
        for i, item in enumerate(values):
            where = f"{name}[{i}]" if field.is_repeated else name
            if field.type == field.TYPE_STRING and isinstance(item, bytes):
                return where, item
            if field.type == field.TYPE_MESSAGE and (found := first_invalid(item, where)):
                return found
    return None
