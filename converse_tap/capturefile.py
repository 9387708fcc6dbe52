"""Capture files are opened only as regular files: a FIFO, a terminal or a device named as a capture would block
the open or the reads forever (a FIFO with no writer) or never end (/dev/zero)."""

from __future__ import annotations

import os
import stat
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
