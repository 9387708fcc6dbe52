"""A stream callable that forwards each SSE chunk untouched and reassembles the events it carries."""

from __future__ import annotations

import logging
import time
import zlib

from ..a2a.grpc_frames import GrpcFrame, GrpcFrameParser, parser_anomalies
from ..a2a.sse import SseEvent, SseParser

log = logging.getLogger(__name__)


class SseTap:
    """Set as `flow.response.stream`. Returns every chunk the moment it arrives, byte for byte.

    Compressed streams (Content-Encoding gzip/deflate/br/zstd) are decompressed incrementally for parsing
    only; what the client receives is still the original bytes.
    """

    __slots__ = ("_decoder", "bytes", "events", "failed", "parser")

    def __init__(self, max_event_bytes: int, content_encoding: str = "") -> None:
        self.parser = SseParser(max_event_bytes)
        self.events: list[SseEvent] = []
        self.bytes = 0
        self.failed: str | None = None
        self._decoder = _decoder(content_encoding.strip().lower())

    def __call__(self, chunk: bytes) -> bytes:
        try:
            self.bytes += len(chunk)
            if self.failed is None:
                now = time.time()
                if chunk:
                    data = self._decoder(chunk) if self._decoder else chunk
                    if data:
                        self.events.extend(self.parser.feed(data, now))
                else:  # mitmproxy's end-of-stream call
                    self.events.extend(self.parser.close(now))
        except Exception as e:  # never let parsing touch the stream
            self.failed = f"{type(e).__name__}: {e}"
            log.warning("converse-tap: stopped parsing a stream (%s); it is forwarded untouched", self.failed)
        return chunk

    @property
    def comments(self) -> int:
        return self.parser.comments


class GrpcTap:
    """Set as `flow.response.stream` for gRPC responses: every chunk is returned the moment it arrives, byte
    for byte, so streamed messages are relayed one by one; the length-prefixed messages are reassembled aside."""

    __slots__ = ("failed", "frames", "parser")

    def __init__(self, max_message_bytes: int, grpc_encoding: str = "") -> None:
        self.parser = GrpcFrameParser(max_message_bytes, grpc_encoding)
        self.frames: list[GrpcFrame] = []
        self.failed: str | None = None

    def __call__(self, chunk: bytes) -> bytes:
        try:
            if self.failed is None and chunk:
                self.frames.extend(self.parser.feed(chunk, time.time()))
        except Exception as e:  # never let parsing touch the stream
            self.failed = f"{type(e).__name__}: {e}"
            log.warning("converse-tap: stopped parsing a gRPC stream (%s); it is forwarded untouched", self.failed)
        return chunk

    @property
    def bytes(self) -> int:
        return self.parser.bytes

    def anomalies(self) -> list[str]:
        if self.failed is not None:
            return [f"grpc_parse_failed:{self.failed}"]
        return parser_anomalies(self.parser)


def _decoder(encoding: str):
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
    if encoding == "deflate":
        return zlib.decompressobj().decompress
    if encoding == "br":
        import brotli  # mitmproxy depends on it

        return brotli.Decompressor().process
    if encoding == "zstd":
        import zstandard  # mitmproxy depends on it

        return zstandard.ZstdDecompressor().decompressobj().decompress
    raise ValueError(f"unsupported content-encoding {encoding!r}")
