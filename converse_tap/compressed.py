"""Compressed captures (a year of `mitmdump -w` files or HAR exports is usually kept as `.gz`, `.bz2` or `.xz`;
mitmproxy writes its HAR export zlib-compressed as `.zhar`):
recognised by their magic bytes and decompressed, a megabyte at a time, into a temporary file that ingest then
reads like any other capture (split among processes, read record by record, damage reported where it is).

The decompressed file is bounded by the disk, not by memory: decompression stops, and says so, before the disk
holding the temporary directory (`TMPDIR`) falls below `KEEP_FREE`, so that a small file that expands without
end (a decompression bomb) costs only itself."""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO

from .a2a.inflate import zstd  # the module mitmproxy itself uses (compression.zstd or its backport)
from .capturefile import open_regular

# magic bytes -> the name of the compression
MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",  # a HAR in a zip (Playwright's `.har.zip`: the HAR and its bodies as files beside it)
    # a bare zlib stream: mitmproxy's own compressed HAR export (`save.har FILE.zhar`, `--set hardump=FILE.zhar`);
    # its header at each compression level, and taken only when the first bytes inflate (`compression_of`)
    **dict.fromkeys((b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda"), "zlib"),
}
_STEP = 1 << 20  # bytes decompressed at a time
_CHECK = 64 << 20  # bytes written between two looks at the disk's free space
KEEP_FREE = 1 << 30  # bytes of disk left free at least, and a twentieth of the disk
# memory an xz stream may ask of its decoder: its dictionary, which the header sets up to 1.5 GiB and the decoder
# fills as output goes (a 46 KB file took decompression to 323 MB); xz -9 needs 65 MiB. gzip needs 32 KiB, bzip2
# about 4 MB, zstd frames past a 128 MiB window are refused by the decoder itself
XZ_MEMLIMIT = 128 << 20


class NotDecompressed(Exception):
    """`reason`: why the file was not (wholly) decompressed; `written`: the bytes decompressed before that, into
    `partial` (None when nothing was); `room`: it stopped for the disk's reserve, not for damage."""

    def __init__(self, reason: str, written: int = 0, partial: Path | None = None, room: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.written, self.partial, self.room = reason, written, partial, room


def compression_of(head: bytes) -> str | None:
    """The compression whose magic bytes `head` starts with, or None. A zlib header is two bytes that text may
    start with (`x^`): it is a zlib stream only if the bytes after it inflate."""
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            if name == "zlib":
                try:
                    zlib.decompressobj().decompress(head, 1 << 16)  # (bounded: a look, not a bomb)
                except zlib.error:
                    return None
            return name
    return None


def opened(name: str, raw: BinaryIO) -> io.BufferedIOBase | IO[bytes]:
    """The decompressed bytes of `raw` (compressed with `name`), to be read a step at a time."""
    if name == "zip":
        return _har_member(raw)
    if name == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if name == "bzip2":
        return io.BufferedReader(_Streams(raw, bz2.BZ2Decompressor, "a bzip2 stream"))
    if name == "zstd":
        return zstd.ZstdFile(raw, "rb")
    if name == "zlib":
        return io.BufferedReader(_Zlib(raw))
    return io.BufferedReader(
        _Streams(raw, lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT), "an xz stream")
    )


def _har_member(raw: BinaryIO) -> IO[bytes]:
    """The HAR file of a zip (its one member named `*.har`), to be read; NotDecompressed for any other zip."""
    try:
        archive = zipfile.ZipFile(raw)
        names = [i for i in archive.infolist() if i.filename.lower().endswith(".har") and not i.is_dir()]
        if len(names) != 1:
            raise NotDecompressed(f"a zip holding {len(names)} files named *.har, not one HAR and its bodies")
        return archive.open(names[0])
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, ValueError, OSError) as e:
        raise NotDecompressed(f"the zip data is damaged or unsupported ({e})") from None


class _Streams(io.RawIOBase):
    """The streams of an xz or bzip2 file decompressed one after the other, null bytes between or after them
    skipped as padding (as xz allows), any other bytes after a stream read as the next one, so damage there is
    reported. `lzma.LZMAFile` takes no memory limit; `bz2.BZ2File` took bytes after a stream that failed at once for
    trailing garbage and stopped there in silence: a later stream damaged near its start, and the captures in it
    and after it (pbzip2, lbzip2 and `cat` write several), were lost without a word. `decoder()`: a new stream's
    decompressor; `what`: the stream's name, for a file that ends inside one."""

    def __init__(self, raw: BinaryIO, decoder: Callable[[], Any], what: str) -> None:
        self.raw, self.new_decoder, self.what = raw, decoder, what
        self.decoder = decoder()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            if self.decoder.eof:  # a stream ended: another may follow, after stream padding (null bytes)
                data = self.decoder.unused_data.lstrip(b"\0")
                while not data:
                    more = self.raw.read(_STEP)
                    if not more:
                        return 0
                    data = more.lstrip(b"\0")
                self.decoder = self.new_decoder()
            elif self.decoder.needs_input:
                data = self.raw.read(_STEP)
                if not data:
                    raise EOFError(f"the file ends inside {self.what}")
            else:
                data = b""
            out = self.decoder.decompress(data, max_length=len(buffer))
            if out:
                buffer[: len(out)] = out
                return len(out)


class _Zlib(io.RawIOBase):
    """A zlib stream decompressed a read at a time (`zlib.decompressobj` with its output bounded by the read)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.decoder = zlib.decompressobj()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            if self.decoder.eof:
                if self.decoder.unused_data or self.raw.read(1):
                    raise zlib.error("bytes after the end of the zlib stream")
                return 0
            data = self.decoder.unconsumed_tail or self.raw.read(_STEP)
            if not data:
                raise EOFError("the file ends inside a zlib stream")
            out = self.decoder.decompress(data, len(buffer))
            if out:
                buffer[: len(out)] = out
                return len(out)


# what the xz and zstd decoders say of a stream that asks for more memory than they allow (the xz decoder's limit
# is XZ_MEMLIMIT, the zstd decoder's own is the same 128 MiB), what the stream declares, and what to run instead
_TOO_BIG = {"xz": ("memory", "the dictionary", "xz -d"), "zstd": ("too much memory", "the window", "zstd -d --long=31")}


def _unread(name: str, e: Exception) -> str:
    """Why the decoder of `name` stopped with `e`."""
    said, what, command = _TOO_BIG.get(name, ("", "", ""))
    if said and said in str(e).lower():
        return (
            f"its decoder would need more than {XZ_MEMLIMIT >> 20} MiB of memory ({what} it declares): "
            f"decompress it first ({command}) and ingest the result"
        )
    return f"the {name} data is damaged ({e})"


def _room(folder: Path) -> int:
    """Bytes that may still be written into `folder`'s disk, keeping KEEP_FREE and a twentieth of it free."""
    usage = shutil.disk_usage(folder)
    return usage.free - max(KEEP_FREE, usage.total // 20)


def decompress(path: Path, name: str, folder: Path, read: Callable[[int], None] | None = None) -> Path:
    """`path` (compressed with `name`) decompressed into a new file in `folder`; `read(n)`, if given, is told the
    bytes of `path` read so far as it goes. NotDecompressed when it cannot be read to its end (the file left holds
    what came before the damage) or would take the disk past its reserve."""
    fd, copy = tempfile.mkstemp(suffix=".capture", dir=folder)  # (listing the folder for a name: n² over a round)
    out = Path(copy)
    written = 0
    room = _room(folder)
    with open(fd, "wb") as dst, open_regular(path) as raw:  # (the descriptor closed whatever happens)
        src = opened(name, raw)  # (a zip other than a HAR's: NotDecompressed, nothing written)
        # one decompression step a read (`read1`): `read` gathers steps up to _STEP and drops them all when a later
        # one fails, so that a cut capture of less than a megabyte lost every record before the damage
        step = getattr(src, "read1", src.read)
        try:
            while True:
                try:
                    data = step(_STEP)
                except (
                    OSError, EOFError, ValueError, RuntimeError, NotImplementedError, zlib.error, lzma.LZMAError,
                    zstd.ZstdError, zipfile.BadZipFile,
                ) as e:  # fmt: skip
                    raise NotDecompressed(_unread(name, e), written, out) from None
                if not data:
                    return out
                if written + len(data) > room:
                    raise NotDecompressed(
                        f"decompressed past {written:,} bytes it would leave less than "
                        f"{max(KEEP_FREE, shutil.disk_usage(folder).total // 20) >> 20:,} MiB free on the disk of "
                        f"{folder.parent}: decompress it where there is room (or set TMPDIR) and ingest the result",
                        written,
                        out,
                        room=True,
                    )
                try:
                    dst.write(data)
                except OSError as e:  # the disk filled faster than measured, or failed
                    raise NotDecompressed(
                        f"its decompressed copy could not be written under {folder.parent} ({e.strerror or e}): "
                        "decompress it where there is room (or set TMPDIR) and ingest the result",
                        written,
                        out,
                        room=e.errno == errno.ENOSPC,
                    ) from None
                written += len(data)
                if read is not None:
                    read(raw.tell())
                if written % _CHECK < len(data):
                    room = written + _room(folder)
        finally:
            src.close()
