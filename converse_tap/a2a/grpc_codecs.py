"""gRPC's wire forms besides protobuf over HTTP/2, and the values ProtoJSON cannot print.

- Content types: `application/grpc[+codec]`, gRPC-Web `application/grpc-web[+codec]` and its base64 text form
  `application/grpc-web-text[+codec]`. The codec is protobuf unless named (`+json`: each message is ProtoJSON).
- gRPC-Web ends a response with a trailers frame (flag 0x80) holding HTTP/1-style `name: value` lines.
- `application/grpc-web-text` bodies are base64, possibly several padded pieces one after another.
- A Timestamp or Duration out of range, a NaN or infinite number in a Struct: `json_format` refuses the whole
  message; `mend` drops the value instead.
- A Struct (message metadata, where the converse envelope rides) holds every number as a double, and
  `json_format` prints each as a float: `message_to_dict` prints one that is a whole number a double holds
  exactly (within ±2^53) as the integer the JSON bindings carry (`1`, not `1.0`).
"""

from __future__ import annotations

import binascii
import functools
import math
import re
from dataclasses import dataclass
from typing import Any

from .headers import Headers

_CONTENT = re.compile(r"application/grpc(?P<web>-web(?P<text>-text)?)?(?:\+(?P<codec>[a-z0-9][a-z0-9._-]*))?")
_B64_PIECE = re.compile(rb"[A-Za-z0-9+/]+={0,2}")  # a piece ends with its padding (or the body)
_SPACE = re.compile(rb"[ \t\r\n]+")
MAX_TRAILERS = 100  # lines of a gRPC-Web trailers frame read
_TIMES = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})


@dataclass(frozen=True, slots=True)
class GrpcContent:
    web: bool  # gRPC-Web: trailers in the body
    text: bool  # gRPC-Web text: the body is base64
    codec: str  # "proto", "json", or the name of another message codec

    @property
    def label(self) -> str:
        """The content type without its parameters, as the anomalies name it."""
        kind = "grpc-web-text" if self.text else "grpc-web" if self.web else "grpc"
        return f"application/{kind}" + ("" if self.codec == "proto" else f"+{self.codec[:40]}")


def grpc_content(content_type: str | None) -> GrpcContent | None:
    """Which gRPC form a content type names, or None when it is not gRPC (`application/grpcx`, JSON, ...)."""
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    m = _CONTENT.fullmatch(ctype)
    if m is None:
        return None
    return GrpcContent(m["web"] is not None, m["text"] is not None, m["codec"] or "proto")


def unbase64(body: bytes) -> bytes | None:
    """A gRPC-Web text body decoded: pieces each padded (a server may encode each write apart), line breaks
    ignored. None when it is not base64."""
    data = _SPACE.sub(b"", body)
    out = bytearray()
    pos = 0
    a2b = binascii.a2b_base64
    try:
        for m in _B64_PIECE.finditer(data):
            if m.start() != pos:
                return None
            piece = m.group()
            out += a2b(piece + b"=" * (-len(piece) % 4), strict_mode=True)
            pos = m.end()
    except binascii.Error:
        return None
    return bytes(out) if pos == len(data) else None


def trailer_block(data: bytes) -> tuple[Headers, bool]:
    """The header lines of a gRPC-Web trailers frame (names lower-cased; values decoded as mitmproxy decodes a
    header, odd bytes kept as surrogates), and whether every line was one."""
    items = []
    clean = True
    lines = data.split(b"\n", MAX_TRAILERS)  # (a block of a million line breaks: not a million objects)
    if len(lines) > MAX_TRAILERS:
        clean = not lines[-1].strip()  # more lines than are read (or only a last line break)
        del lines[MAX_TRAILERS:]
    for line in lines:
        line = line.rstrip(b"\r")
        if not line:
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            clean = False
            continue
        items.append((name.strip().decode("latin-1"), value.strip().decode("utf-8", "surrogateescape")))
    return Headers(items), clean


def from_json(cls: Any, data: bytes) -> Any:
    """One message of the `+json` codec (ProtoJSON) as a protobuf message of `cls`; raises ValueError when it is
    not one (json_format's errors, bad UTF-8, nesting deeper than the parser takes)."""
    from google.protobuf import json_format

    try:
        return json_format.Parse(data.decode("utf-8"), cls(), ignore_unknown_fields=True)
    except (json_format.Error, RecursionError, UnicodeDecodeError) as e:
        raise ValueError(type(e).__name__) from e


MAX_EXACT = 2**53  # past it a double no longer holds every integer: a Struct's number there is already rounded


def message_to_dict(message: Any) -> Any:
    """`json_format.MessageToDict(message)`, with a Struct's whole numbers (within ±MAX_EXACT) as integers.

    A JSON binding's envelope `{"n": 1}` is `{"n": 1.0}` once through a Struct and json_format: its column and
    `envelope_json` would say `1.0`, and a wrong-typed value's anomaly `=float`, where the same reply over JSON
    says `1` and `=int`. JSON itself has one number type, so `1` is what the value was. The printer's `Value`
    hook is json_format's own (private) one; without it (another protobuf), numbers print as json_format
    prints them."""
    from google.protobuf import json_format

    printer = _printer()
    if printer is not None:
        try:
            return printer._MessageToJsonObject(message)
        except (AttributeError, TypeError):  # a protobuf whose private printer changed shape: its public one
            pass
    return json_format.MessageToDict(message)


@functools.cache
def _printer() -> Any:
    from google.protobuf import json_format

    base: Any = getattr(json_format, "_Printer", None)
    if base is None or not hasattr(base, "_ValueMessageToJsonObject") or not hasattr(base, "_MessageToJsonObject"):
        return None

    class Printer(base):
        def _ValueMessageToJsonObject(self, message: Any) -> Any:
            which = message.WhichOneof("kind")
            if which == "string_value":  # (what json_format gives, without its generic field printing)
                return message.string_value
            if which == "number_value":
                value = message.number_value
                if value.is_integer() and -MAX_EXACT <= value <= MAX_EXACT:  # (NaN and infinities are not)
                    return int(value)
            elif which == "bool_value":
                return message.bool_value
            return base._ValueMessageToJsonObject(self, message)  # lists, structs, nulls, other numbers

    try:
        return Printer()
    except TypeError:  # a constructor that wants arguments: json_format's own printing
        return None


def mend(message: Any) -> list[str]:
    """Drop what ProtoJSON cannot print from `message`, in place, and name each kind dropped: Timestamps and
    Durations out of range (their field cleared), non-finite numbers of a Value (made null). Nesting is bounded
    by the protobuf runtime's parse depth (100)."""
    dropped: list[str] = []
    _mend(message, dropped)
    return sorted(set(dropped))


def _mend(message: Any, dropped: list[str]) -> None:
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Value" and message.WhichOneof("kind") == "number_value":
        if not math.isfinite(message.number_value):
            message.null_value = 0
            dropped.append("number")
        return
    for fd, value in message.ListFields():
        kind = fd.message_type
        if kind is None:
            continue
        if kind.GetOptions().map_entry:
            if kind.fields_by_name["value"].message_type is not None:
                for item in value.values():
                    _mend(item, dropped)
            continue
        for item in list(value) if fd.is_repeated else [value]:
            if kind.full_name in _TIMES and not _printable(item):
                dropped.append(kind.name)
                if fd.is_repeated:
                    value.remove(item)
                else:
                    message.ClearField(fd.name)
            else:
                _mend(item, dropped)


def _printable(time: Any) -> bool:
    try:
        time.ToJsonString()
    except ValueError:
        return False
    return True
