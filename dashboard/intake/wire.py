"""A minimal protobuf wire-format scanner.

Why: ``onnx.load`` parses every initializer's bytes into memory. A multi-GB model only needs its
graph structure to be classified, so we walk the wire format over an ``mmap`` and hand only the
small parts (nodes, value infos, tensor headers) to the C++ protobuf parser. Weight bytes are
skipped by length and never copied.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

VARINT, FIXED64, LENGTH, GROUP_START, GROUP_END, FIXED32 = 0, 1, 2, 3, 4, 5


# For each byte: is it a one-byte tag (field numbers 1-15) of a length-delimited field?
_LENGTH_TAGS = tuple(8 <= tag < 0x80 and tag & 7 == LENGTH for tag in range(256))


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


class Field(NamedTuple):
    """One field occurrence: ``start`` is where its tag begins, ``value_start``/``end`` bound its
    payload (for length-delimited fields, the bytes after the length prefix). A NamedTuple: a
    graph's thousands of initializers yield one each, and tuples are built several times faster."""

    number: int
    wire_type: int
    start: int
    value_start: int
    end: int


def read_varint(buf, pos: int, limit: int) -> tuple[int, int]:
    """Decode one varint at ``pos``; return (value, next position)."""
    result = 0
    shift = 0
    while True:
        if pos >= limit:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def _next_field(buf, pos: int, limit: int) -> Field:
    """The field whose tag starts at ``pos``."""
    tag_start = pos
    tag = buf[pos]
    if tag < 0x80:  # one-byte tag (fields 1-15): skip the general decoder
        pos += 1
    else:
        tag, pos = read_varint(buf, pos, limit)
    number, wire_type = tag >> 3, tag & 7
    if number == 0:
        raise WireError("field number 0")
    if wire_type == LENGTH:
        if pos < limit and buf[pos] < 0x80:  # one-byte length
            length, value_start = buf[pos], pos + 1
        else:
            length, value_start = read_varint(buf, pos, limit)
        pos = value_start + length
    elif wire_type == VARINT:
        _, pos = read_varint(buf, pos, limit)
        return Field(number, wire_type, tag_start, tag_start, pos)
    elif wire_type == FIXED64:
        value_start, pos = pos, pos + 8
    elif wire_type == FIXED32:
        value_start, pos = pos, pos + 4
    else:
        raise WireError(f"unsupported wire type {wire_type}")
    if pos > limit:
        raise WireError("field runs past the end of the message")
    return Field(number, wire_type, tag_start, value_start, pos)


def split_message(buf, start: int, end: int, special: frozenset[int], large: int) -> list[slice | Field]:
    """The message in ``buf[start:end]`` as pieces in order: a ``slice`` covers a run of fields to
    keep as they are; a ``Field`` is one whose number is in ``special``, or one that is
    length-delimited and longer than ``large`` bytes, for the caller to handle.

    This is the loop over every node and initializer of a graph (tens of thousands of fields), so
    the common case (a one-byte tag of a length-delimited field, with a length of up to three
    bytes) is decoded inline, and an ordinary field costs no object at all; anything else goes
    through the general decoder. The caller hands each run to protobuf in one piece. Indexing a
    ``memoryview`` of the file is the fastest way Python reads its bytes one at a time.
    """
    pieces: list[slice | Field] = []
    run = pos = start
    while pos < end:
        tag = buf[pos]
        if _LENGTH_TAGS[tag] and pos + 3 < end:  # one-byte tag, length-delimited: length decoded here
            length, value_start = buf[pos + 1], pos + 2
            if length >= 0x80:
                length, value_start = length & 0x7F | (buf[pos + 2] & 0x7F) << 7, pos + 3
                if buf[pos + 2] >= 0x80:
                    length, value_start = length | (buf[pos + 3] & 0x7F) << 14, pos + 4
                    if buf[pos + 3] >= 0x80:  # four bytes or more: the general decoder
                        value_start = -1
            if 0 <= value_start and value_start + length <= end:
                if length <= large and (tag >> 3) not in special:
                    pos = value_start + length
                    continue
                field = Field(tag >> 3, LENGTH, pos, value_start, value_start + length)
            else:
                field = _next_field(buf, pos, end)
        else:
            field = _next_field(buf, pos, end)
        if field.number not in special and (field.wire_type != LENGTH or field.end - field.value_start <= large):
            pos = field.end
            continue
        if run < pos:
            pieces.append(slice(run, pos))
        pieces.append(field)
        pos = run = field.end
    if run < end:
        pieces.append(slice(run, end))
    return pieces


def count_fields(buf, start: int, end: int, number: int, at_most: int) -> int:
    """How many fields numbered ``number`` the message in ``buf[start:end]`` holds (its own fields,
    not those of sub-messages), or ``at_most + 1`` as soon as there are more than ``at_most``. Why: the reader counts a graph's nodes before protobuf parses them,
    so a hostile count is refused before it costs memory. Nothing is built per field; the common
    case (a one-byte tag of a length-delimited field, a length of up to two bytes) is decoded inline
    as in ``split_message``."""
    count, pos = 0, start
    while pos < end:
        tag = buf[pos]
        if _LENGTH_TAGS[tag] and pos + 2 < end:
            length, value_start = buf[pos + 1], pos + 2
            if length >= 0x80:
                if buf[pos + 2] >= 0x80:
                    field = _next_field(buf, pos, end)
                    count += field.number == number
                    pos = field.end
                    continue
                length, value_start = length & 0x7F | buf[pos + 2] << 7, pos + 3
            if value_start + length > end:
                raise WireError("field runs past the end of the message")
            count += tag >> 3 == number
            if count > at_most:
                return count
            pos = value_start + length
            continue
        field = _next_field(buf, pos, end)
        count += field.number == number
        pos = field.end
    return count


def rewrite_message(buf, start: int, end: int, fields: frozenset[int],
                    edit: Callable[[Field], bytes | None]) -> bytes:
    """The message in ``buf[start:end]`` with each field whose number is in ``fields`` replaced by
    ``edit(field)`` (its new encoding, tag included; ``b""`` drops it, None keeps it), every other
    byte copied as is."""
    out = []
    for piece in split_message(buf, start, end, fields, end - start + 1):
        if isinstance(piece, slice):
            out.append(bytes(buf[piece]))
            continue
        new = edit(piece)
        out.append(bytes(buf[piece.start:piece.end]) if new is None else new)
    return b"".join(out)


def encode_varint(value: int) -> bytes:
    """The varint encoding of a non-negative ``value``."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` holding ``payload`` (a sub-message or bytes), tag and length included."""
    return encode_varint(number << 3 | LENGTH) + encode_varint(len(payload)) + payload
