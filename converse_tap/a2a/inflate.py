"""Bounded, incremental Content-Encoding decoding: a compression bomb costs at most a fixed amount of memory.

gzip, x-gzip, deflate (zlib-wrapped or raw), br and zstd, chained as `Content-Encoding` lists them. zstd goes
through the module mitmproxy itself uses (`compression.zstd`, or its `backports.zstd` before Python 3.14).
Decoders hand out their output in pieces of at most `PIECE` bytes, so nothing ever inflates a whole body at once.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import brotli

try:  # pragma: no cover - which one depends on the Python version
    from compression import zstd
except ImportError:  # pragma: no cover
    from backports import zstd

ENCODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd", "identity")
PIECE = 1 << 20
# codings a body may be wrapped in (servers use one, rarely two): each is a decoder and a level of recursion in
# `_chain`, so a header listing thousands of them (and a body nested as deep) must be refused, not followed
MAX_CODINGS = 8
# RFC 9659: HTTP zstd decoders need windows of at most 8 MB, and a larger one is how a frame makes the decoder
# allocate up to 2 GiB before it yields a byte
ZSTD_WINDOW_LOG_MAX = 23


class Truncated(ValueError):
    """A whole body whose encoded stream does not end: cut short. `partial` holds what it decoded to."""

    def __init__(self, encodings: str, partial: bytes) -> None:
        super().__init__(f"{encodings} stream cut short")
        self.partial = partial


class TooLarge(ValueError):
    """The decoded body grew past the limit; what was decoded so far is discarded."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decoded body larger than {limit} bytes")
        self.limit = limit


_WINDOW = {"br": 16 * 1024 * 1024, "zstd": 1 << ZSTD_WINDOW_LOG_MAX}


class _Stage:
    """One encoding's decompressor: `pieces(data)` yields its output in pieces of at most PIECE bytes."""

    def __init__(self, encoding: str) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"unsupported content-encoding {encoding!r}")
        self.encoding = encoding
        self._raw_deflate = False
        self._fresh = True
        self._obj = self._new()

    def _new(self):
        e = self.encoding
        if e in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if e == "deflate":
            return zlib.decompressobj(-zlib.MAX_WBITS if self._raw_deflate else zlib.MAX_WBITS)
        if e == "br":
            return brotli.Decompressor()
        return _zstd_decompressor()

    def pieces(self, data: bytes) -> Iterator[bytes]:
        e = self.encoding
        if e == "br":
            yield from self._brotli(data)
        elif e == "zstd":
            yield from self._zstd(data)
        else:
            yield from self._zlib(data)

    def _zlib(self, data: bytes) -> Iterator[bytes]:
        while data:
            obj = self._obj
            if obj.eof:
                if self.encoding == "deflate":
                    raise zlib.error("data after the end of the deflate stream")
                if not data.strip(b"\x00"):  # zero padding after the last member: readers ignore it
                    return
                self._obj = obj = self._new()  # gzip allows members one after another: each is decoded
            try:
                out = obj.decompress(data, PIECE)
            except zlib.error:
                if self.encoding != "deflate" or self._raw_deflate or not self._fresh:
                    raise
                self._raw_deflate = True  # servers that send raw deflate under the name "deflate"
                self._obj = obj = self._new()
                out = obj.decompress(data, PIECE)
            self._fresh = False
            while True:
                if out:
                    yield out
                if not obj.unconsumed_tail:
                    break
                out = obj.decompress(obj.unconsumed_tail, PIECE)
            data = obj.unused_data if obj.eof else b""

    @property
    def ended(self) -> bool:
        """Whether what was fed ends where the encoding's stream ends (a body cut short does not)."""
        obj = self._obj
        if self.encoding == "br":
            return bool(obj.is_finished())
        return bool(obj.eof)

    def _brotli(self, data: bytes) -> Iterator[bytes]:
        obj = self._obj
        out = obj.process(data, output_buffer_limit=PIECE)
        while True:
            if out:
                yield out
            if obj.can_accept_more_data() or obj.is_finished():
                return
            out = obj.process(b"", output_buffer_limit=PIECE)

    def _zstd(self, data: bytes) -> Iterator[bytes]:
        while data:
            obj = self._obj
            if obj.eof:  # concatenated frames are allowed
                self._obj = obj = _zstd_decompressor()
            out = obj.decompress(data, max_length=PIECE)
            while True:
                if out:
                    yield out
                if obj.needs_input or obj.eof:
                    break
                out = obj.decompress(b"", max_length=PIECE)
            data = obj.unused_data if obj.eof else b""


def _zstd_decompressor():
    return zstd.ZstdDecompressor(options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX})


class Inflater:
    """Feed compressed chunks, get decoded bytes in pieces; the total decoded never exceeds `limit` (None: no
    total limit, for long streams: memory stays bounded by the piece size all the same).

    Raises TooLarge once the decoded body would pass `limit` (and on every later feed), ValueError for an
    unsupported encoding or more than MAX_CODINGS of them (at construction) or corrupt data.
    """

    __slots__ = ("_stages", "failed", "limit", "total")

    def __init__(self, content_encoding: str, limit: int | None) -> None:
        names = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
        names = [e for e in names if e != "identity"]
        if len(names) > MAX_CODINGS:
            raise ValueError(f"{len(names)} content-codings, more than the {MAX_CODINGS} decoded")
        # the last applied encoding is listed last and is undone first
        self._stages = [_Stage(e) for e in reversed(names)]
        self.limit = limit
        self.total = 0
        self.failed: ValueError | None = None

    @property
    def identity(self) -> bool:
        return not self._stages

    @property
    def held(self) -> int:
        """An upper estimate of what the decoders' windows hold: each stage up to its window (br 16 MiB, zstd
        8 MiB, gzip and deflate 32 KiB), and never more than has been decoded (a window fills as data comes)."""
        return sum(min(self.total, _WINDOW.get(stage.encoding, 32 * 1024)) for stage in self._stages)

    def pieces(self, data: bytes) -> Iterator[bytes]:
        if self.failed is not None:
            raise self.failed
        try:
            for piece in self._chain(data, 0):
                self.total += len(piece)
                if self.limit is not None and self.total > self.limit:
                    raise TooLarge(self.limit)
                yield piece
        except TooLarge as e:
            self.failed = e
            raise
        except (zlib.error, brotli.error, zstd.ZstdError, EOFError) as e:
            self.failed = ValueError(f"cannot decode {self._names()}: {e}")
            raise self.failed from e

    def _chain(self, data: bytes, i: int) -> Iterator[bytes]:
        if i == len(self._stages):
            yield data
            return
        for piece in self._stages[i].pieces(data):
            yield from self._chain(piece, i + 1)

    def feed(self, data: bytes) -> bytes:
        return b"".join(self.pieces(data))

    @property
    def ended(self) -> bool:
        """Whether every coding's stream has ended (True for identity)."""
        return all(stage.ended for stage in self._stages)

    def _names(self) -> str:
        return ", ".join(s.encoding for s in reversed(self._stages))


def inflate(raw: bytes, content_encoding: str, limit: int) -> bytes:
    """A whole body decoded, bounded by `limit` (TooLarge past it; ValueError when it does not decode; Truncated,
    holding what was decoded, when its stream is cut short — a capture of a stream the client left, say)."""
    inflater = Inflater(content_encoding, limit)
    if inflater.identity or not raw:  # (no body at all is no stream cut short: a HEAD's, a 204's)
        if len(raw) > limit:
            raise TooLarge(limit)
        return raw
    out = inflater.feed(raw)
    if not inflater.ended:
        raise Truncated(inflater._names(), out)
    return out


def decoded_prefix(raw: bytes, content_encoding: str, size: int) -> bytes:
    """The first `size` decoded bytes of a body (whatever its full size), b"" when it does not decode."""
    out = bytearray()
    try:
        for piece in Inflater(content_encoding, None).pieces(raw):
            out += piece
            if len(out) >= size:
                break
    except ValueError:
        pass
    return bytes(out[:size])
