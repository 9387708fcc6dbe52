"""Incremental gRPC message framing: length-prefixed messages reassembled from arbitrary chunks.

Each message on a gRPC stream is a 5-byte prefix (a compressed flag, 0 or 1, then the length as a 32-bit
big-endian integer) followed by that many bytes. A compressed message is decoded with the stream's
`grpc-encoding`, bounded, and must be one whole compressed stream: cut short, or followed by other bytes, it is an
error, not a message (a protobuf message cut at a field boundary would otherwise parse as a shorter one).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from .inflate import ENCODINGS, TooLarge, inflate

PREFIX = 5
_HEAD = struct.Struct(">BI")  # the prefix: flag, length
_WEB_TRAILERS = (0x80, 0x81)  # gRPC-Web's trailers frame (0x81: compressed)
SLICE = 16 * 1024  # a whole body is split into messages this many bytes at a time (`body_frames`)


@dataclass(slots=True)
class GrpcFrame:
    """One length-prefixed message. `data` is the (decompressed) message, empty when `oversize` or `error`."""

    data: bytes
    received: float | None = None  # when its last byte arrived
    compressed: bool = False
    length: int = 0  # as the prefix declares it (compressed size)
    oversize: bool = False  # longer than the limit (declared, or once decompressed): skipped, never buffered
    error: str | None = None  # why a compressed message could not be decompressed
    trailers: bool = False  # gRPC-Web: the trailers frame (flag 0x80), `data` its HTTP/1-style header block


class GrpcFrameParser:
    """Feed bytes as they arrive; `feed` returns the messages completed by that chunk. O(bytes) overall.

    A message whose declared length exceeds `max_message_bytes` is reported as soon as its prefix is read
    (`oversize=True`, no data) and its bytes are skipped. A prefix whose flag is neither 0 nor 1 makes the rest
    of the stream unparseable: `malformed` says where, and later bytes are only counted (`web`: gRPC-Web, whose
    trailers come as a last frame flagged 0x80, also takes 0x80 and 0x81). `messages` counts the messages whose
    prefix was read; once `count_only` is set, later messages are only counted (skipped like an oversize one:
    neither held nor decompressed), except gRPC-Web's first trailers frame, which is still read (it holds the
    call's status); later trailers frames are counted in `trailers_counted` too.
    """

    __slots__ = (
        "_buf",
        "_encoding",
        "_frame",
        "_skip",
        "_skip_counted",
        "_skip_late",
        "_skip_length",
        "bytes",
        "count_only",
        "counted_after_trailers",
        "malformed",
        "max_message_bytes",
        "messages",
        "trailers_counted",
        "trailers_read",
        "web",
    )

    def __init__(self, max_message_bytes: int = 16 * 1024 * 1024, encoding: str = "", web: bool = False) -> None:
        self.max_message_bytes = max_message_bytes
        enc = encoding.strip().lower()
        self._encoding = "" if enc == "identity" else enc
        self._buf = bytearray()
        self._frame: tuple[int, int] | None = None  # (flag, length) of the message being read
        self._skip = 0  # bytes of an oversize message still to skip
        self._skip_length = 0  # the length of the message being skipped
        self._skip_counted = False  # the message being skipped was not returned (only counted, or shed)
        self._skip_late = False  # ... and it is a message after a trailers frame that was read
        self.bytes = 0
        self.malformed: str | None = None
        self.messages = 0
        self.count_only = False
        self.web = web
        self.trailers_read = False  # a trailers frame has been returned
        self.trailers_counted = 0  # trailers frames only counted (count_only), among `messages`
        self.counted_after_trailers = False  # a message only counted came after a trailers frame that was read

    @property
    def held(self) -> int:
        """Bytes of the message being read that this parser holds."""
        return len(self._buf)

    def shed(self) -> bool:
        """Drop the message being read (the rest of its bytes are skipped as they come); True if there was one.
        For a caller over its memory budget."""
        if self._frame is None:  # at most a part of the next prefix: kept, it is the stream's framing
            return False
        _flag, length = self._frame
        self._skip = length - len(self._buf)
        self._skip_counted, self._skip_length = True, length  # not returned: counted once whole
        self._frame = None
        self._buf.clear()
        return True

    def feed(self, chunk: bytes | memoryview, received: float | None = None) -> list[GrpcFrame]:
        self.bytes += len(chunk)
        if self.malformed is not None or not chunk:
            return []
        view = memoryview(chunk)
        if self._skip:
            n = min(self._skip, len(view))
            self._skip -= n
            view = view[n:]
            if not self._skip:
                self.counted_after_trailers |= self._skip_late and self._skip_counted
                self._skip_counted = self._skip_late = False
        buf = self._buf
        if self.count_only and self._frame is None and not buf:  # counted in place, not copied
            pos = self._count(view, 0, len(view))
            if self.malformed is not None:
                return []
            if len(view) - pos < PREFIX:
                buf += view[pos:]  # the start of the next prefix
                return []
            view = view[pos:]  # the first trailers frame: read below
        buf += view
        out: list[GrpcFrame] = []
        pos, end, frame = 0, len(buf), self._frame
        unpack, limit = _HEAD.unpack_from, self.max_message_bytes
        while True:
            if frame is None:
                if self.count_only:
                    pos = self._count(buf, pos, end)
                    if self.malformed is not None:
                        return out
                if end - pos < PREFIX:
                    break
                flag, length = unpack(buf, pos)
                if flag > 1 and not (self.web and flag in _WEB_TRAILERS):
                    self._malformed(flag, self.bytes - end + pos)
                    return out
                pos += PREFIX
                self.messages += 1
                if length > limit:
                    self.trailers_read = self.trailers_read or flag > 1
                    out.append(GrpcFrame(b"", received, flag & 1 == 1, length, oversize=True, trailers=flag > 1))
                    have = min(length, end - pos)
                    pos += have
                    self._skip, self._skip_length = length - have, length
                    if self._skip:
                        break
                    continue
                frame = (flag, length)
            flag, length = frame
            if end - pos < length:
                break
            with memoryview(buf) as whole:  # (one copy: a slice of the bytearray would be a second)
                data = bytes(whole[pos : pos + length])
            pos += length
            frame = None
            if flag > 1 and self.trailers_read:  # a later trailers frame: only its first counts, never inflated
                got = GrpcFrame(b"", received, flag & 1 == 1, length)
            elif flag & 1:
                got = self._message(data, received)
            else:
                got = GrpcFrame(data, received, False, length)
            got.trailers = flag > 1
            self.trailers_read = self.trailers_read or got.trailers
            out.append(got)
        self._frame = frame
        if self.malformed is None:
            del buf[:pos]
        return out

    def _count(self, data: bytearray | memoryview, pos: int, end: int) -> int:
        """Count-only: the messages of `data[pos:end]` (the chunk's last bytes) skipped, prefix by prefix (a tight
        loop: a body of 5-byte empty messages costs no object per message); the position reached, the rest of a
        message left to skip."""
        unpack, n, trailers, flag, length = _HEAD.unpack_from, 0, self.trailers_counted, 0, 0
        while end - pos >= PREFIX:
            flag, length = unpack(data, pos)
            if flag > 1:
                if not (self.web and flag in _WEB_TRAILERS):
                    self._malformed(flag, self.bytes - end + pos)
                    break
                if not self.trailers_read:  # the call's trailers: left to be read
                    break
                self.trailers_counted += 1
            n += 1
            pos += PREFIX + length
        self.messages += n
        whole = n - (self.trailers_counted - trailers)  # messages counted, not trailers frames
        if pos > end:
            self._skip = pos - end
            self._skip_counted, self._skip_length = True, length
            pos = end
            if flag <= 1:  # the last is not whole yet: after trailers only once it is
                whole -= 1
                self._skip_late = self.trailers_read
        if self.trailers_read and whole > 0:
            self.counted_after_trailers = True
        return pos

    def _malformed(self, flag: int, offset: int) -> None:
        self.malformed = f"flag={flag}@{offset}"
        self._buf.clear()
        self._frame = None

    def unfinished(self) -> int:
        """1 when a message counted in `messages` is neither whole nor returned (its bytes are still coming)."""
        return 1 if self._frame is not None or (self._skip and self._skip_counted) else 0

    def pending(self) -> int:
        """Bytes of an incomplete message that arrived (prefix included), held or skipped: non-zero at the end
        means a cut. (A message skipped, oversize, only counted or shed, counts as if it were held: its bytes that
        came, never the bytes its prefix still promised.)"""
        if self._skip:
            return PREFIX + self._skip_length - self._skip
        return len(self._buf) + (PREFIX if self._frame is not None else 0)

    def _message(self, data: bytes, received: float | None) -> GrpcFrame:
        """A compressed message, decompressed."""
        frame = GrpcFrame(b"", received, True, len(data))
        if not self._encoding:
            frame.error = "compressed_without_grpc_encoding"
            return frame
        if self._encoding not in ENCODINGS:  # one coding, as gRPC names it (not a list)
            frame.error = f"grpc_encoding_invalid:{self._encoding[:40]}"
            return frame
        try:
            frame.data = inflate_message(data, self._encoding, self.max_message_bytes)
        except TooLarge:
            frame.oversize = True
        except ValueError:
            frame.error = "inflate_failed"
        return frame


def inflate_message(data: bytes, encoding: str, limit: int) -> bytes:
    """One compressed message decoded (TooLarge past `limit`, ValueError when it is not one whole stream).

    gzip and deflate (zlib-wrapped, or raw as some servers send it), the codings gRPC names, must end where the
    message ends; other codings the bounded inflater knows are decoded by it."""
    try:
        if encoding in ("gzip", "x-gzip"):
            return _zlib_whole(data, 16 + zlib.MAX_WBITS, limit)
        if encoding == "deflate":
            try:
                return _zlib_whole(data, zlib.MAX_WBITS, limit)
            except zlib.error:
                return _zlib_whole(data, -zlib.MAX_WBITS, limit)
    except zlib.error as e:
        raise ValueError(f"cannot decode {encoding}: {e}") from e
    return inflate(data, encoding, limit)


def _zlib_whole(data: bytes, wbits: int, limit: int) -> bytes:
    obj = zlib.decompressobj(wbits)
    out = obj.decompress(data, limit + 1)  # at most one byte past the limit is ever produced
    if len(out) > limit:
        raise TooLarge(limit)
    if not obj.eof:
        raise ValueError("compressed message cut short")
    if obj.unused_data:
        raise ValueError("bytes after the compressed message")
    return out


def parse_frames(
    body: bytes, max_message_bytes: int = 16 * 1024 * 1024, encoding: str = "", received: float | None = None
) -> tuple[list[GrpcFrame], list[str]]:
    """Split a whole gRPC body into its messages; the anomalies say when it was malformed or cut short."""
    size = len(body) - PREFIX
    if size >= 0 and body[0] == 0 and int.from_bytes(body[1:PREFIX], "big") == size <= max_message_bytes:
        return [GrpcFrame(body[PREFIX:], received, False, size)], []  # one plain message, as requests are
    parser = GrpcFrameParser(max_message_bytes, encoding)
    frames = parser.feed(body, received)
    return frames, parser_anomalies(parser)


def body_frames(
    body: bytes,
    max_message_bytes: int = 16 * 1024 * 1024,
    encoding: str = "",
    received: float | None = None,
    web: bool = False,
) -> tuple[Iterator[GrpcFrame], GrpcFrameParser]:
    """The messages of a whole body, split SLICE bytes at a time as they are taken: a body of a million empty
    messages is never a million objects at once. `parser_anomalies(parser)` once they have all been taken."""
    parser = GrpcFrameParser(max_message_bytes, encoding, web)
    view = memoryview(body)

    def frames() -> Iterator[GrpcFrame]:
        for start in range(0, len(view), SLICE):
            yield from parser.feed(view[start : start + SLICE], received)

    return frames(), parser


def first_frame(
    body: bytes, max_message_bytes: int = 16 * 1024 * 1024, encoding: str = "", web: bool = False
) -> tuple[GrpcFrame | None, int, list[str]]:
    """The first message of a whole body (a unary request), how many messages it holds and its anomalies. The
    others are only counted: never copied, never decompressed."""
    parser = GrpcFrameParser(max_message_bytes, encoding, web)
    view = memoryview(body)
    end = PREFIX + int.from_bytes(view[1:PREFIX], "big") if len(view) >= PREFIX else len(view)
    frames = parser.feed(view[:end])
    parser.count_only = True
    parser.feed(view[end:])
    return (frames[0] if frames else None), parser.messages, parser_anomalies(parser)


def parser_anomalies(parser: GrpcFrameParser) -> list[str]:
    out = []
    if parser.malformed is not None:
        out.append(f"grpc_frame_malformed:{parser.malformed}")
    elif parser.pending():
        out.append(f"grpc_frame_truncated:{parser.pending()}")
    return out
