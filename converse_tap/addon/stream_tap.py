"""A stream callable that forwards each SSE chunk untouched and reassembles the events it carries."""

from __future__ import annotations

import logging
import time
import zlib

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
