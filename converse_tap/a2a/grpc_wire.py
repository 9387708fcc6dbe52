"""How many values a protobuf message would make, counted on its wire bytes before the runtime builds it.

Each field on the wire costs at least two bytes, but turns into a message object (about 128 bytes in the runtime)
and then a Python value of the ProtoJSON dict: a 4 MB Task of two million empty `history` entries took 600 MB and
8 s to decode. The JSON bindings refuse a document of over `fastjson.MAX_VALUES` values unparsed; this is the
same bound for protobuf, counted by walking the tags against the message's descriptor (nested messages are
entered, strings and bytes skipped by their length), stopping as soon as the bound is passed.
"""

from __future__ import annotations

import functools
from typing import Any

from .fastjson import MAX_VALUES

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_PACKED = "packed"  # a repeated number field: each element at least one byte
MAX_DEPTH = 100  # the protobuf runtime's own nesting limit: deeper is refused by it, not counted here


def too_many_values(data: bytes, descriptor: Any, limit: int = MAX_VALUES) -> bool:
    """Whether `data`, a message of `descriptor`, holds more than `limit` values (fields, elements). A message no
    longer than `limit` bytes cannot (every value takes at least a byte): not walked."""
    return len(data) > limit and count_values(data, descriptor, limit) > limit


def count_values(data: bytes, descriptor: Any, limit: int = MAX_VALUES) -> int:
    """The values of `data` (a message of `descriptor`), counted up to just past `limit`. Bytes that are not a
    well-formed message end the count where they start, and nesting past the runtime's limit is not entered:
    the runtime refuses them."""
    view = memoryview(data)
    resume: list[tuple[int, int, Any]] = []  # the enclosing messages: where each goes on (at most MAX_DEPTH)
    pos, end, desc = 0, len(view), descriptor
    fields = _fields(desc)
    n = 0
    while True:
        if pos >= end:
            if not resume:
                return n
            pos, end, desc = resume.pop()
            fields = _fields(desc)
            continue
        key = view[pos]
        if key < 0x80:  # (most keys are one byte: read inline)
            pos += 1
        else:
            key, pos = _varint(view, pos, end)
        if key < 0:
            pos = end  # not a message from here: the runtime decides
            continue
        n += 1
        if n > limit:
            return n
        wire = key & 7
        if wire == _VARINT:
            _, pos = _varint(view, pos, end)
            if pos < 0:
                pos = end
        elif wire == _I64:
            pos += 8
        elif wire == _I32:
            pos += 4
        elif wire == _LEN:
            size = view[pos] if pos < end else 0x80
            if size < 0x80:
                pos += 1
            else:
                size, pos = _varint(view, pos, end)
            if size < 0 or pos + size > end:
                pos = end
                continue
            inner = fields.get(key >> 3)
            if inner == _PACKED:
                n += size
            elif inner is not None and len(resume) < MAX_DEPTH:
                resume.append((pos + size, end, desc))
                end, desc = pos + size, inner
                fields = _fields(desc)
                continue
            pos += size
        else:  # groups (no proto3 message has them) or a broken key
            pos = end


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    """A varint at `pos` and the position after it, or (-1, -1) when the bytes end first or it runs too long."""
    value = shift = 0
    while pos < end and shift < 70:
        b = view[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    return -1, -1


@functools.cache
def _fields(descriptor: Any) -> dict[int, Any]:
    """field number -> the descriptor of its message type (map entries included), or _PACKED for a repeated
    number; strings, bytes and single numbers are absent (skipped). Cached per descriptor (the SDK's few dozen)."""
    out: dict[int, Any] = {}
    for f in descriptor.fields:
        if f.message_type is not None:
            out[f.number] = f.message_type
        elif f.is_repeated and f.type not in (f.TYPE_STRING, f.TYPE_BYTES):
            out[f.number] = _PACKED
    return out
