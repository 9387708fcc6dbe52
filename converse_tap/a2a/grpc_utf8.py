"""A protobuf message whose string fields hold bytes that are not UTF-8, mended on the wire.

proto3 strings must be UTF-8, and the runtime refuses the whole message when one is not: a Task of fifty history
messages was lost for one odd byte in one part (a reader that decodes leniently shows that part with U+FFFD).
`mend_utf8` rewrites the message's bytes with each such string decoded with U+FFFD for its odd bytes (and
its length prefix, and those of the messages holding it, recomputed), walking the tags against the descriptor as
`grpc_wire` does. Only called once the runtime has refused a message: never on the common path.
"""

from __future__ import annotations

import functools
from typing import Any

from .grpc_wire import MAX_DEPTH, _varint

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_STRING = "string"


def mend_utf8(data: bytes, descriptor: Any) -> bytes | None:
    """`data` (a message of `descriptor`) with its strings made UTF-8, or None when nothing needed mending or the
    bytes are not a well-formed message (then the runtime's refusal stands)."""
    try:
        out = _mend(memoryview(data), descriptor, 0)
    except ValueError:
        return None
    return out if out != data else None


def _mend(view: memoryview, descriptor: Any, depth: int) -> bytes:
    if depth > MAX_DEPTH:
        raise ValueError("too deep")
    fields = _fields(descriptor)
    out = bytearray()
    pos, end = 0, len(view)
    while pos < end:
        start = pos
        key, pos = _varint(view, pos, end)
        if key < 0:
            raise ValueError("broken key")
        wire = key & 7
        if wire == _VARINT:
            _, pos = _varint(view, pos, end)
            if pos < 0:
                raise ValueError("broken varint")
        elif wire in (_I64, _I32):
            pos += 8 if wire == _I64 else 4
            if pos > end:
                raise ValueError("cut number")
        elif wire == _LEN:
            size, at = _varint(view, pos, end)
            if size < 0 or at + size > end:
                raise ValueError("cut field")
            kind = fields.get(key >> 3)
            if kind is not None:  # a string, or a message that may hold one: rewritten with its new length
                value = view[at : at + size]
                mended = _text(value) if kind == _STRING else _mend(value, kind, depth + 1)
                out += view[start:pos]  # the key
                out += _encode_varint(len(mended))
                out += mended
                pos = at + size
                continue
            pos = at + size
        else:  # groups (no proto3 message has them) or a broken key
            raise ValueError("unsupported wire type")
        out += view[start:pos]
    return bytes(out)


def _text(value: memoryview) -> bytes:
    raw = value.tobytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace").encode("utf-8")
    return raw


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@functools.cache
def _fields(descriptor: Any) -> dict[int, Any]:
    """field number -> _STRING for a string field, or the descriptor of its message type (map entries too)."""
    out: dict[int, Any] = {}
    for f in descriptor.fields:
        if f.type == f.TYPE_STRING:
            out[f.number] = _STRING
        elif f.message_type is not None:
            out[f.number] = f.message_type
    return out
