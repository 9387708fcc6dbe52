"""Bounded, incremental Content-Encoding decoding: a compression bomb costs at most `limit` bytes of output.

gzip, x-gzip, deflate (zlib-wrapped or raw), br and zstd, chained as `Content-Encoding` lists them. zstd goes
through the module mitmproxy itself uses (`compression.zstd`, or its `backports.zstd` before Python 3.14).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import brotli

try:  # pragma: no cover - which one depends on the Python version
    from compression import zstd
except ImportError:  # pragma: no cover
    from backports import zstd

ENCODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd", "identity")


class TooLarge(ValueError):
    """The decoded body grew past the limit; what was decoded so far is discarded."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decoded body larger than {limit} bytes")
        self.limit = limit


class _Stage:
    """One encoding's decompressor; `feed` returns at most `room` bytes and raises TooLarge past it."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._raw_deflate = False
        self._obj = self._new()

    def _new(self):
        e = self.encoding
        if e in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if e == "deflate":
            return zlib.decompressobj(-zlib.MAX_WBITS if self._raw_deflate else zlib.MAX_WBITS)
        if e == "br":
            return brotli.Decompressor()
        if e == "zstd":
            return zstd.ZstdDecompressor()
        raise ValueError(f"unsupported content-encoding {e!r}")

    def feed(self, data: bytes, room: int) -> bytes:
        """Decode `data`; the output may not exceed `room` bytes (room + 1 is asked for, to notice the excess)."""
        e = self.encoding
        if e == "br":
            return self._brotli(data, room)
        if e == "zstd":
            return self._zstd(data, room)
        try:
            return self._zlib(data, room)
        except zlib.error:
            if e == "deflate" and not self._raw_deflate and self._fresh:
                self._raw_deflate = True  # servers that send raw deflate under the name "deflate"
                self._obj = self._new()
                return self._zlib(data, room)
            raise

    _fresh = True

    def _zlib(self, data: bytes, room: int) -> bytes:
        out = self._obj.decompress(data, room + 1)
        self._fresh = False
        if len(out) > room or self._obj.unconsumed_tail:
            raise TooLarge(room)
        return out

    def _brotli(self, data: bytes, room: int) -> bytes:
        obj = self._obj
        out = obj.process(data, output_buffer_limit=room + 1)
        if len(out) > room or not obj.can_accept_more_data():
            raise TooLarge(room)
        return out

    def _zstd(self, data: bytes, room: int) -> bytes:
        obj = self._obj
        if obj.eof:  # a second frame: zstd allows concatenated frames
            unused = obj.unused_data
            self._obj = obj = zstd.ZstdDecompressor()
            data = unused + data
        out = obj.decompress(data, max_length=room + 1)
        if len(out) > room or (not obj.needs_input and not obj.eof):
            raise TooLarge(room)
        if obj.eof and obj.unused_data:
            rest = obj.unused_data
            self._obj = zstd.ZstdDecompressor()
            out += self._zstd(rest, room - len(out))
        return out


class Inflater:
    """Feed compressed chunks, get decoded bytes; the total decoded never exceeds `limit`.

    Raises TooLarge once the decoded body would pass `limit` (and on every later feed), ValueError for an
    unsupported encoding (at construction) or corrupt data.
    """

    __slots__ = ("_stages", "failed", "limit", "total")

    def __init__(self, content_encoding: str, limit: int) -> None:
        names = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
        names = [e for e in names if e != "identity"]
        # the last applied encoding is listed last and is undone first
        self._stages = [_Stage(e) for e in reversed(names)]
        self.limit = limit
        self.total = 0
        self.failed: BaseException | None = None

    @property
    def identity(self) -> bool:
        return not self._stages

    def feed(self, data: bytes) -> bytes:
        if self.failed is not None:
            raise self.failed
        try:
            for stage in self._stages:
                if not data:
                    return b""
                data = stage.feed(data, self.limit - self.total)
            if self.total + len(data) > self.limit:
                raise TooLarge(self.limit)
        except TooLarge as e:
            self.failed = TooLarge(self.limit)
            raise self.failed from e
        except (zlib.error, brotli.error, zstd.ZstdError, EOFError) as e:
            self.failed = ValueError(f"cannot decode {self._names()}: {e}")
            raise self.failed from e
        self.total += len(data)
        return data

    def _names(self) -> str:
        return ", ".join(s.encoding for s in reversed(self._stages))


def inflate(raw: bytes, content_encoding: str, limit: int) -> bytes:
    """A whole body decoded, bounded by `limit` (TooLarge past it; ValueError when it does not decode)."""
    inflater = Inflater(content_encoding, limit)
    if inflater.identity:
        if len(raw) > limit:
            raise TooLarge(limit)
        return raw
    return inflater.feed(raw)


def decoder(content_encoding: str, limit: int) -> Callable[[bytes], bytes] | None:
    """`Inflater(...).feed`, or None for an identity (or empty) encoding."""
    inflater = Inflater(content_encoding, limit)
    return None if inflater.identity else inflater.feed
