"""Capture files are opened only as regular files: a FIFO, a terminal or a device named as a capture would block
the open or the reads forever (a FIFO with no writer) or never end (/dev/zero)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from .store.filekind import file_kind


class NotRegular(OSError):
    """The path names something other than a regular file; `what` says what it is."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path} is {what}, not a regular file")
        self.what = what


def open_regular(path: Path, follow: bool = True) -> BinaryIO:
    """`open(path, "rb")`, refusing anything but a regular file without blocking on it. What it names is looked at
    before it is opened (opening a device acts: `/dev/watchdog` arms a reboot, a tape rewinds), and again once
    opened (O_NONBLOCK: a FIFO put there in between opens at once instead of waiting, and is then refused).
    `follow=False`: a symbolic link is refused too (a file a capture names, which must not lead elsewhere)."""
    mode = os.stat(path).st_mode if follow else os.lstat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegular(path, file_kind(mode))
    nofollow = 0 if follow else os.O_NOFOLLOW
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(path, file_kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


CHUNK = 1 << 20  # bytes read at once: records of a few KiB are parsed from one read by the hundred
WHOLE = 8 << 20  # a record up to this size is read into memory whole; a larger one is read piece by piece


class Shrank(Exception):
    """The file ended before the size it had when it was opened: it was truncated while it was read."""


class FileBytes:
    """Bytes [0, size) of a capture file, read with `pread` (never memory-mapped: a page of a mapping past the end
    of a file truncated while it is read kills the process with SIGBUS; a read past it is only short). Supports what
    the readers use of `bytes`: `len`, an index, a slice, `find` and `rfind`; the last CHUNK read is kept, so the
    many small accesses of one record cost one read. A short read raises Shrank."""

    __slots__ = ("base", "data", "fd", "size")

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size, self.base, self.data = fd, size, 0, b""

    def __len__(self) -> int:
        return self.size

    def _pread(self, start: int, n: int) -> bytes:
        got = os.pread(self.fd, n, start)
        while len(got) < n:  # a regular file reads short only at its end
            more = os.pread(self.fd, n - len(got), start + len(got))
            if not more:
                raise Shrank(f"the file shrank below {self.size} bytes while it was read")
            got += more
        return got

    def view(self, start: int, stop: int) -> tuple[bytes, int]:
        """Bytes holding [start, stop) of the file (clipped to its size) and the offset of their first byte:
        positions in them are file positions minus that offset."""
        stop = min(stop, self.size)
        base, data = self.base, self.data
        if base <= start and stop <= base + len(data):
            return data, base
        start = max(0, min(start, stop))
        data = self._pread(start, min(max(stop - start, CHUNK), self.size - start))
        self.base, self.data = start, data
        return data, start

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.size)
            if stop <= start:
                return b""
            if stop - start > CHUNK:  # read once, not kept
                return self._pread(start, stop - start)
            data, base = self.view(start, stop)
            return data[start - base : stop - base]
        if key < 0 or key >= self.size:
            raise IndexError("index out of range")
        base, data = self.base, self.data
        if base <= key < base + len(data):
            return data[key - base]
        return self._pread(key, 1)[0]  # (a record's last byte, past the read: the record is read next, from its start)

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        end = self.size if end is None else min(end, self.size)
        pos = max(0, start)
        while pos < end:
            data, base = self.view(pos, min(end, pos + CHUNK))
            last = min(end, base + len(data))
            hit = data.find(sub, pos - base, last - base)
            if hit >= 0:
                return base + hit
            if last >= end:
                return -1
            pos = max(pos + 1, last - len(sub) + 1)  # a match across the two reads
        return -1

    def rfind(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        end = self.size if end is None else min(end, self.size)
        start = max(0, start)
        while end > start:
            data, base = self.view(max(start, end - CHUNK), end)
            first = max(start, base)
            hit = data.rfind(sub, first - base, end - base)
            if hit >= 0:
                return base + hit
            if first <= start:
                return -1
            end = min(end - 1, first + len(sub) - 1)
        return -1

    def record(self, start: int, stop: int) -> tuple[Any, int]:
        """What to parse bytes [start, stop) of the file from, and the offset to subtract from file positions:
        bytes in memory up to WHOLE, past that this object itself (read piece by piece, never whole)."""
        if stop - start <= WHOLE:
            return self.view(start, stop)
        return self, 0


@contextmanager
def opened(path: Path, start: int, end: int | None) -> Iterator[tuple[FileBytes, int, int] | None]:
    """A capture file opened for reading bytes [start, end): (its bytes, where reading stops, the file's descriptor,
    kept open so that its size can be watched), or None when the range holds nothing."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        stop_at = size if end is None else min(end, size)
        if start >= stop_at:
            yield None
            return
        yield FileBytes(f.fileno(), size), stop_at, f.fileno()
