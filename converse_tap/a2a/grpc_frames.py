"""Incremental gRPC message framing: length-prefixed messages reassembled from arbitrary chunks.

Each message on a gRPC stream is a 5-byte prefix (a compressed flag, 0 or 1, then the length as a 32-bit
big-endian integer) followed by that many bytes. A compressed message is decoded with the stream's
`grpc-encoding` through the bounded inflater.
"""

from __future__ import annotations

from dataclasses import dataclass

from .inflate import TooLarge, inflate

PREFIX = 5


@dataclass(slots=True)
class GrpcFrame:
    """One length-prefixed message. `data` is the (decompressed) message, empty when `oversize` or `error`."""

    data: bytes
    received: float | None = None  # when its last byte arrived
    compressed: bool = False
    length: int = 0  # as the prefix declares it (compressed size)
    oversize: bool = False  # longer than the limit (declared, or once decompressed): skipped, never buffered
    error: str | None = None  # why a compressed message could not be decompressed


class GrpcFrameParser:
    """Feed bytes as they arrive; `feed` returns the messages completed by that chunk. O(bytes) overall.

    A message whose declared length exceeds `max_message_bytes` is reported as soon as its prefix is read
    (`oversize=True`, no data) and its bytes are skipped. A prefix whose flag is neither 0 nor 1 makes the rest
    of the stream unparseable: `malformed` says where, and later bytes are only counted.
    """

    __slots__ = ("_buf", "_encoding", "_frame", "_skip", "bytes", "malformed", "max_message_bytes")

    def __init__(self, max_message_bytes: int = 16 * 1024 * 1024, encoding: str = "") -> None:
        self.max_message_bytes = max_message_bytes
        enc = encoding.strip().lower()
        self._encoding = "" if enc == "identity" else enc
        self._buf = bytearray()
        self._frame: tuple[bool, int] | None = None  # (compressed, length) of the message being read
        self._skip = 0  # bytes of an oversize message still to skip
        self.bytes = 0
        self.malformed: str | None = None

    @property
    def held(self) -> int:
        """Bytes of the message being read that this parser holds."""
        return len(self._buf)

    def shed(self) -> bool:
        """Drop the message being read (the rest of its bytes are skipped as they come); True if there was one.
        For a caller over its memory budget."""
        if self._frame is None:  # at most a part of the next prefix: kept, it is the stream's framing
            return False
        _compressed, length = self._frame
        self._skip = length - len(self._buf)
        self._frame = None
        self._buf.clear()
        return True

    def feed(self, chunk: bytes, received: float | None = None) -> list[GrpcFrame]:
        self.bytes += len(chunk)
        if self.malformed is not None or not chunk:
            return []
        view = memoryview(chunk)
        if self._skip:
            n = min(self._skip, len(view))
            self._skip -= n
            view = view[n:]
        buf = self._buf
        buf += view
        out: list[GrpcFrame] = []
        pos = 0
        while True:
            if self._frame is None:
                if len(buf) - pos < PREFIX:
                    break
                flag = buf[pos]
                if flag not in (0, 1):
                    self.malformed = f"flag={flag}@{self.bytes - len(buf) + pos}"
                    buf.clear()
                    return out
                length = int.from_bytes(buf[pos + 1 : pos + PREFIX], "big")
                pos += PREFIX
                if length > self.max_message_bytes:
                    out.append(GrpcFrame(b"", received, flag == 1, length, oversize=True))
                    have = min(length, len(buf) - pos)
                    pos += have
                    self._skip = length - have
                    if self._skip:
                        break
                    continue
                self._frame = (flag == 1, length)
            compressed, length = self._frame
            if len(buf) - pos < length:
                break
            data = bytes(buf[pos : pos + length])
            pos += length
            self._frame = None
            out.append(self._message(data, compressed, received))
        del buf[:pos]
        return out

    def pending(self) -> int:
        """Bytes of an incomplete message (prefix included) held or skipped: non-zero at the end means a cut."""
        held = len(self._buf) + (PREFIX if self._frame is not None else 0)
        return held + self._skip

    def _message(self, data: bytes, compressed: bool, received: float | None) -> GrpcFrame:
        frame = GrpcFrame(data, received, compressed, len(data))
        if not compressed:
            return frame
        frame.data = b""
        if not self._encoding:
            frame.error = "compressed_without_grpc_encoding"
            return frame
        try:
            frame.data = inflate(data, self._encoding, self.max_message_bytes)
        except TooLarge:
            frame.oversize = True
        except ValueError as e:
            unsupported = "unsupported" in str(e)
            frame.error = f"grpc_encoding_invalid:{self._encoding[:40]}" if unsupported else "inflate_failed"
        return frame


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


def parser_anomalies(parser: GrpcFrameParser) -> list[str]:
    out = []
    if parser.malformed is not None:
        out.append(f"grpc_frame_malformed:{parser.malformed}")
    elif parser.pending():
        out.append(f"grpc_frame_truncated:{parser.pending()}")
    return out
