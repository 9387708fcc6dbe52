"""gRPC-Web as it arrives in pieces: its base64 text form decoded chunk by chunk, its trailers frames followed.

- `Base64Stream`: an `application/grpc-web-text` body decoded as its chunks come, with the same result as
  `grpc_codecs.unbase64` on the whole body (pieces each padded, line breaks ignored), whatever the chunking: a
  chunk may end inside a base64 quad or inside a piece's padding. It holds at most the few characters of an
  unfinished quad. Where the text stops being base64 it stops decoding (`bad`); what came before is kept.
- `WebTrailers`: the trailers frames of a gRPC-Web response (the first is the call's trailers, later ones are
  counted) and whether a message came after one. The live tap and a whole body share it, so both give one row.
- `text_frames`: a whole text body split into messages as it is decoded (SLICE characters at a time).
"""

from __future__ import annotations

import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field

from .grpc_codecs import _B64_PIECE, _SPACE
from .grpc_frames import SLICE, GrpcFrame, GrpcFrameParser

_A2B = binascii.a2b_base64


class Base64Stream:
    """Feed the characters of a gRPC-Web text body as they come; `feed` returns the bytes they complete, `close`
    the last ones. Where the text stops being base64, `bad` is set: the bytes decoded before that spot are
    returned (the same whatever the chunking), and nothing after it."""

    __slots__ = ("_pad", "_rest", "bad")

    def __init__(self) -> None:
        self._rest = b""  # the unfinished end: at most 3 characters of a quad and 2 of padding
        self._pad = 0  # `=` the last piece, its quads whole, may still take (2 in all, as unbase64 takes them)
        self.bad = False

    @property
    def held(self) -> int:
        return len(self._rest)

    def feed(self, chunk: bytes | memoryview) -> bytes:
        if self.bad:
            return b""
        data = self._rest + _SPACE.sub(b"", chunk)
        self._rest = b""
        pos = 0
        while self._pad and pos < len(data) and data[pos] == 0x3D:  # more of that padding
            self._pad -= 1
            pos += 1
        if pos < len(data):
            self._pad = 0
        out = bytearray()
        for m in _B64_PIECE.finditer(data, pos):
            if m.start() != pos:
                break
            piece = m.group()
            pos = m.end()
            alpha = len(piece.rstrip(b"="))
            whole = alpha - alpha % 4
            out += _A2B(piece[:whole])  # whole quads of the alphabet: always decodable
            rest = piece[whole:]
            if pos == len(data):  # the last piece may go on in the next chunk
                if alpha == whole:  # (only padding: `=` after whole quads is taken, up to 2)
                    self._pad, rest = 2 - len(rest), b""
                self._rest = rest
                return bytes(out)
            if alpha > whole:  # a piece ended by what follows it: its last quad, padded as unbase64 pads it
                try:
                    out += _A2B(rest + b"=" * (-len(rest) % 4), strict_mode=True)
                except binascii.Error:
                    break
        if pos != len(data):  # a character out of the alphabet, a third `=`, a piece starting with `=`
            self.bad = True
        return bytes(out)

    def close(self) -> bytes:
        """The end of the body: what is left must be a piece's end of its own (its padding may be left out)."""
        rest, self._rest, self._pad = self._rest, b"", 0
        if self.bad or not rest:
            return b""
        if _B64_PIECE.fullmatch(rest) is not None:
            try:
                return _A2B(rest + b"=" * (-len(rest) % 4), strict_mode=True)
            except binascii.Error:
                pass
        self.bad = True
        return b""


@dataclass(slots=True)
class WebTrailers:
    """What the trailers frames of a gRPC-Web response said so far."""

    first: GrpcFrame | None = None  # the call's trailers
    frames: int = 0
    late: bool = False  # a message came after a trailers frame (noted once)
    notes: list[str] = field(default_factory=list)  # the framing's notes, known at the end (live)

    def take(self, frame: GrpcFrame, anomalies: list[str]) -> bool:
        """True when `frame` is a trailers frame (then kept if it is the first); a message after one is noted."""
        if frame.trailers:
            if self.first is None:
                self.first = frame
            self.frames += 1
            return True
        if self.first is not None and not self.late:
            self.late = True
            anomalies.append("grpc_web_message_after_trailers")
        return False


def text_frames(
    body: bytes, max_message_bytes: int, encoding: str, received: float | None, notes: list[str]
) -> tuple[Iterator[GrpcFrame], GrpcFrameParser]:
    """The messages of a whole gRPC-Web text body, decoded and split SLICE characters at a time, as a live tap
    does it: the messages before text that is not base64 are kept, and `notes` gets `grpc_web_text_not_base64`
    once they have all been taken."""
    parser = GrpcFrameParser(max_message_bytes, encoding, web=True)
    text = Base64Stream()
    view = memoryview(body)

    def frames() -> Iterator[GrpcFrame]:
        for start in range(0, len(view), SLICE):
            yield from parser.feed(text.feed(view[start : start + SLICE]), received)
            if text.bad:
                break
        yield from parser.feed(text.close(), received)
        if text.bad:
            notes.append("grpc_web_text_not_base64")

    return frames(), parser
