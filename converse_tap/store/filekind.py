"""What a path is, in words, from its stat mode: no imports beyond the standard library (the CLI's argument
checks use it before anything heavy loads)."""

from __future__ import annotations

import stat


def file_kind(mode: int) -> str:
    """What a stat mode is, in words: a directory, a FIFO, ..."""
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return kind
    return "a file"
