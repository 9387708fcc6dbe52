"""The flow ids of a run of a flow file's records, read as fast as the file allows: the ids of earlier shares of a
parallel ingest, so that a flow found twice counts once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from .capturefile import Pages, mapped
from .flowfile import _DICT, _STR, _Bad, _fields, _head, _value


def ids(path: Path, start: int = 0, end: int | None = None) -> Iterator[str]:
    """The flow ids of the records in bytes [start, end), as fast as the file allows: mitmproxy writes a flow's
    `id` after all its other values but `type` and `version`, so it is the last `2:id;` key of a record."""
    with mapped(path, start, end) as mapping:
        if mapping is None:
            return
        mm, stop_at, _ = mapping
        size = len(mm)
        pages = Pages(mm, start)
        offset = start
        while offset < stop_at:
            try:
                rs, re_, tag = _head(mm, offset, size)
            except (_Bad, ValueError):
                return  # the reader of this part reports the damage
            found = None
            at = mm.rfind(b"2:id;", rs, re_)
            if at >= 0:
                with contextlib.suppress(_Bad, ValueError):
                    vs, ve, vt = _head(mm, at + 5, re_)
                    if vt == _STR and mm[ve + 1 : ve + 8] == b"4:type;":
                        found = mm[vs:ve].decode("utf-8", "surrogateescape")
            if found is None and tag == _DICT:
                with contextlib.suppress(_Bad, ValueError):
                    loc = _fields(mm, rs, re_).get(b"id")
                    if loc is not None:
                        found = str(_value(mm, *loc))
            if found is not None:
                yield found
            offset = re_ + 1
            pages.passed(offset)
