"""Capture files are opened only as regular files: a FIFO, a terminal or a device named as a capture would block
the open or the reads forever (a FIFO with no writer) or never end (/dev/zero)."""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .store.filekind import file_kind


class NotRegular(OSError):
    """The path names something other than a regular file; `what` says what it is."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path} is {what}, not a regular file")
        self.what = what


def open_regular(path: Path) -> BinaryIO:
    """`open(path, "rb")`, refusing anything but a regular file without blocking on it (O_NONBLOCK: a FIFO
    with no writer opens at once instead of waiting, and is then refused)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(path, file_kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_RELEASE = 4 * 1024 * 1024  # bytes of mapped file read between two releases of their pages
_PAGE = mmap.ALLOCATIONGRANULARITY


@contextmanager
def mapped(path: Path, start: int, end: int | None) -> Iterator[tuple[mmap.mmap, int, int] | None]:
    """A capture file memory-mapped for reading bytes [start, end): (map, where reading stops, the file's descriptor,
    kept open while mapped so that its size can be watched), or None when the range holds nothing."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        stop_at = size if end is None else min(end, size)
        if start >= stop_at:
            yield None
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm, stop_at, f.fileno()
        finally:
            mm.close()


class Pages:
    """Gives back the pages of a mapped file that the reader has passed, every _RELEASE bytes: memory stays flat
    over a file of any size."""

    __slots__ = ("mm", "released")

    def __init__(self, mm: mmap.mmap, start: int) -> None:
        self.mm, self.released = mm, start - start % _PAGE

    def passed(self, offset: int) -> None:
        if offset - self.released >= _RELEASE:
            upto = offset - offset % _PAGE
            self.mm.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
            self.released = upto
