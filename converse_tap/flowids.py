"""The flow ids of a run of a flow file's records, read as fast as the file allows: the ids of earlier shares of a
parallel ingest, so that a flow found twice counts once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from .capturefile import Shrank, opened
from .tnetview import DICT as _DICT
from .tnetview import STR as _STR
from .tnetview import Bad as _Bad
from .tnetview import fields as _fields
from .tnetview import head as _head
from .tnetview import value as _value


def ids(path: Path, start: int = 0, end: int | None = None) -> Iterator[str]:
    """The flow ids of the records in bytes [start, end), as fast as the file allows: mitmproxy writes a flow's
    `id` after all its other values but `type` and `version`, so it is the last `2:id;` key of a record."""
    with opened(path, start, end) as found:
        if found is None:
            return
        fb, stop_at, _ = found
        size = len(fb)
        offset = start
        with contextlib.suppress(Shrank):  # the reader of this part reports it
            while offset < stop_at:
                try:
                    rs, re_, tag = _head(fb, offset, size)
                except (_Bad, ValueError):
                    return  # the reader of this part reports the damage
                found_id = None
                buf, base = fb.record(offset, re_ + 1)
                rs, re_ = rs - base, re_ - base
                at = buf.rfind(b"2:id;", rs, re_)
                if at >= 0:
                    with contextlib.suppress(_Bad, ValueError):
                        vs, ve, vt = _head(buf, at + 5, re_)
                        if vt == _STR and buf[ve + 1 : ve + 8] == b"4:type;":
                            found_id = buf[vs:ve].decode("utf-8", "surrogateescape")
                if found_id is None and tag == _DICT:
                    with contextlib.suppress(_Bad, ValueError):
                        loc = _fields(buf, rs, re_).get(b"id")
                        if loc is not None:
                            found_id = str(_value(buf, *loc))
                if found_id is not None:
                    yield found_id
                offset = re_ + base + 1
