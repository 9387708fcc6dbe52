"""Fast reader of mitmproxy flow files (`mitmdump -w`): only what ingest needs, straight from the file's bytes.

A flow file is a sequence of tnetstrings (`<length>:<payload><tag>`), one per flow, each the dict of an
`HTTPFlow.get_state()`. Every value carries its length, so a record's fields can be located by walking length
prefixes, and a value ingest does not need (certificates, connection details, WebSocket messages, a body past
`max_body`) is skipped unparsed (in a record larger than 8 MiB, unread). The file is read with `pread` a megabyte at
a time (`capturefile.FileBytes`), never memory-mapped, so memory stays bounded whatever the size of the file or of
one record, and a file truncated while it is read is reported, not a SIGBUS.

Records of the current flow format (mitmproxy's `FLOW_FORMAT_VERSION`) are read this way; records of older
formats are parsed whole by mitmproxy's tnetstring module and migrated by its `compat` module, as
`io.FlowReader` does. Either way the exchange is built by `exchange_from_state`, from a state dict holding the
fields it reads: `tests/test_ingest_exact.py` holds the two paths to the same rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from mitmproxy import version
from mitmproxy.io import compat, tnetstring

from .a2a.exchange import HttpExchange
from .addon.flows import DEFAULT_MAX_BODY, PREFIX, exchange_from_state
from .capturefile import CHUNK, FileBytes, Shrank, opened
from .flowstate import BadRecord, checked

_BYTES, _STR, _INT, _FLOAT, _BOOL, _NULL, _LIST, _DICT = b",;#^!~]}"
_KEY_TAGS = (_STR, _BYTES)
_TAGS = frozenset(b",;#^!~]}")
_RESYNC_BUDGET = 4_000_000  # colons examined to find the record after damage; past it, the rest is reported damaged
MAX_SCALAR = 1024 * 1024  # bytes of a field that is not a body or a header list (a path, a timestamp, an error)
MAX_HEADERS = 10_000  # header fields of one request or response
MAX_KEYS = 4096  # keys of one dict read by the fast reader (a flow's state has about 20)
MAX_WHOLE_CONTAINERS = 1_000_000  # lists and dicts of an older-format record (counted as `]` and `}` bytes)
MAX_WHOLE = 64 * 1024 * 1024  # a record of an older format is parsed whole: above this, it is not read

Skipped = Callable[[int, str], None]  # (byte offset, why): a record that cannot be read, the next one is


class Damaged(Exception):
    """A record that cannot be read, at byte `offset` of the file."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset, self.reason = offset, reason


class _Bad(ValueError):
    pass


def _head(buf: Any, pos: int, end: int) -> tuple[int, int, int]:
    """The payload [start, stop) and type tag of the value whose length prefix starts at `pos`, inside [.., end)."""
    colon = buf.find(b":", pos, pos + 21)
    if colon <= pos:
        raise _Bad("missing or invalid length prefix")
    digits = buf[pos:colon]
    if not digits.isdigit():
        raise _Bad(f"invalid length prefix {digits[:20]!r}")
    start = colon + 1
    stop = start + int(digits)
    if stop >= end:
        raise _Bad(f"a value of {int(digits)} bytes runs past the end of its record")
    return start, stop, buf[stop]


def _fields(buf: Any, start: int, stop: int, until: bytes | None = None) -> dict[bytes, tuple[int, int, int]]:
    """The entries of a dict payload: key -> (start, stop, tag) of the value, values not read; with `until`,
    the entries up to that key only. (`_head` inlined: this loop is most of the reader's time.)"""
    out = {}
    pos = start
    find = buf.find
    while pos < stop:
        colon = find(b":", pos, pos + 21)
        if colon <= pos:
            raise _Bad("missing or invalid length prefix")
        ks = colon + 1
        ke = ks + int(buf[pos:colon])
        if ke >= stop or ke < ks or buf[ke] not in _KEY_TAGS:
            raise _Bad("a dict key that is not a string")
        pos = ke + 1
        colon = find(b":", pos, pos + 21)
        if colon <= pos:
            raise _Bad("missing or invalid length prefix")
        vs = colon + 1
        ve = vs + int(buf[pos:colon])
        if ve >= stop or ve < vs:
            raise _Bad("a value runs past the end of its dict")
        key = buf[ks:ke]
        out[key] = (vs, ve, buf[ve])
        pos = ve + 1
        if key == until:
            break
        if len(out) > MAX_KEYS:
            raise _Bad(f"a dict of more than {MAX_KEYS} keys")
    return out


def _last(buf: Any, start: int, stop: int, marker: bytes) -> tuple[int, int, int] | None:
    """The value of a dict's last entry when its key is `marker` (a key with its prefix and tag, `8:peername;`),
    found from the end without walking the entries before it (as mitmproxy writes connections, their
    `peername` comes last); None when the dict does not end with that key."""
    at = buf.rfind(marker, start, stop)
    if at < 0:
        return None
    try:
        vs, ve, vt = _head(buf, at + len(marker), stop + 1)
    except (_Bad, ValueError):
        return None
    return (vs, ve, vt) if ve + 1 == stop else None


def _value(buf: Any, start: int, stop: int, tag: int) -> Any:
    """A value parsed whole, as mitmproxy's tnetstring reader gives it."""
    if tag == _BYTES:
        return buf[start:stop]
    if tag == _STR:
        return buf[start:stop].decode("utf-8")
    if tag == _INT:
        return int(buf[start:stop])
    if tag == _FLOAT:
        return float(buf[start:stop])
    if tag == _NULL:
        if stop != start:
            raise _Bad("invalid null literal")
        return None
    if tag == _BOOL:
        raw = buf[start:stop]
        if raw not in (b"true", b"false"):
            raise _Bad(f"invalid boolean literal {raw[:10]!r}")
        return raw == b"true"
    if tag == _LIST:
        items = []
        pos = start
        while pos < stop:
            s, e, t = _head(buf, pos, stop)
            items.append(_value(buf, s, e, t))
            pos = e + 1
        return items
    if tag == _DICT:
        return {k.decode("utf-8", "surrogateescape"): _value(buf, *v) for k, v in _fields(buf, start, stop).items()}
    raise _Bad(f"unknown type tag {tag}")


def _headers(buf: Any, start: int, stop: int) -> list[tuple[bytes, bytes]]:
    """A list of [name, value] byte-string pairs (`_head` inlined, as in `_fields`)."""
    out = []
    pos = start
    find = buf.find
    while pos < stop:
        colon = find(b":", pos, pos + 21)
        if colon <= pos:
            raise _Bad("missing or invalid length prefix")
        ps = colon + 1
        pe = ps + int(buf[pos:colon])
        colon = find(b":", ps, ps + 21)
        if colon <= ps or pe >= stop:
            raise _Bad("a header that is not a pair of byte strings")
        ns = colon + 1
        ne = ns + int(buf[ps:colon])
        colon = find(b":", ne + 1, ne + 22)
        if colon <= ne + 1:
            raise _Bad("a header that is not a pair of byte strings")
        vs = colon + 1
        ve = vs + int(buf[ne + 1 : colon])
        if ve + 1 != pe or buf[pe] != _LIST or buf[ne] != _BYTES or buf[ve] != _BYTES or ne < ns or ve < vs:
            raise _Bad("a header that is not a pair of byte strings")
        out.append((buf[ns:ne], buf[vs:ve]))
        if len(out) > MAX_HEADERS:
            raise _Bad(f"more than {MAX_HEADERS} header fields")
        pos = pe + 1
    return out


_SCALARS = (b"method", b"scheme", b"host", b"port", b"path", b"http_version", b"status_code")
_TIMES = (b"timestamp_start", b"timestamp_end")


def _small(buf: Any, loc: tuple[int, int, int]) -> Any:
    """A value that should be a scalar or a short list (a timestamp, a host, an address), parsed whole unless it is
    larger than any such value can be: then costs the record, instead of memory."""
    start, stop, tag = loc
    if stop - start > MAX_SCALAR:
        raise _Bad(f"a field of {stop - start} bytes where a short value belongs")
    return _value(buf, start, stop, tag)


def _message(buf: Any, loc: tuple[int, int, int], max_body: int) -> Any:
    """The request or response fields `exchange_from_state` reads; a body above `max_body` as its size and prefix.
    Values of the wrong type are passed on for `flowstate.checked` to judge, never parsed past a bounded size."""
    start, stop, tag = loc
    if tag != _DICT:
        return _small(buf, loc) if tag != _LIST else []
    fields = _fields(buf, start, stop)
    out: dict[str, Any] = {}
    for key in _SCALARS:
        if key in fields:
            out[key.decode()] = _small(buf, fields[key])
    for key in _TIMES:
        if key in fields:
            out[key.decode()] = _small(buf, fields[key])
    for key in (b"headers", b"trailers"):  # trailers: gRPC's status
        if key in fields:
            hs, he, ht = fields[key]
            out[key.decode()] = _headers(buf, hs, he) if ht == _LIST else _small(buf, fields[key])
    if b"content" in fields:
        cs, ce, ct = fields[b"content"]
        if ct == _BYTES and ce - cs > max_body:
            out["content"] = buf[cs : min(ce, cs + PREFIX)]  # a body below PREFIX: its own bytes, not the next
            out["content_size"] = ce - cs
        elif ct in (_BYTES, _NULL):
            out["content"] = _value(buf, cs, ce, ct)
        else:
            out["content"] = chr(ct)  # not a body: `checked` says so
    return out


def _client(buf: Any, loc: tuple[int, int, int]) -> dict[str, Any] | None:
    start, stop, tag = loc
    if tag != _DICT:
        return None if tag == _NULL else {}
    peer = _last(buf, start, stop, b"8:peername;")
    if peer is None:
        fields = _fields(buf, start, stop)
        peer = fields.get(b"peername")
    return {"peername": _small(buf, peer)} if peer is not None else {}


def _server(buf: Any, loc: tuple[int, int, int]) -> dict[str, Any] | None:
    start, stop, tag = loc
    if tag != _DICT:
        return None if tag == _NULL else {}
    fields = _fields(buf, start, stop, until=b"address")
    address = _small(buf, fields[b"address"]) if b"address" in fields else None
    if address:
        return {"address": address}
    client = _client(buf, loc)  # the peername, found the same way
    return {"address": address, **(client or {})}


def _state(buf: Any, start: int, stop: int, max_body: int) -> dict[str, Any] | None:
    """The fields of one record that `exchange_from_state` reads, or None for a record of another format version
    (read whole instead)."""
    fields = _fields(buf, start, stop)
    ver = fields.get(b"version")
    if ver is None or ver[2] != _INT or int(buf[ver[0] : ver[1]]) != version.FLOW_FORMAT_VERSION:
        return None
    state: dict[str, Any] = {}
    for key in (b"type", b"id", b"error"):
        if key in fields:
            state[key.decode()] = _small(buf, fields[key])
    if state.get("type") != "http":
        return state
    state["request"] = _message(buf, fields[b"request"], max_body) if b"request" in fields else None
    state["response"] = _message(buf, fields[b"response"], max_body) if b"response" in fields else None
    if b"client_conn" in fields:
        state["client_conn"] = _client(buf, fields[b"client_conn"])
    if b"server_conn" in fields:
        state["server_conn"] = _server(buf, fields[b"server_conn"])
    return state


def _whole(buf: Any, start: int, stop: int, tag: int) -> dict[str, Any]:
    """A record of an older format: parsed whole and migrated, as mitmproxy's FlowReader does."""
    if stop - start > MAX_WHOLE:
        raise _Bad(f"a record of another flow format larger than {MAX_WHOLE >> 20} MiB is not migrated")
    raw = buf[start:stop]  # the parser copies it anyway
    if raw.count(b"]") + raw.count(b"}") > MAX_WHOLE_CONTAINERS:
        raise _Bad(f"a record of another flow format of more than {MAX_WHOLE_CONTAINERS:,} lists and dicts")
    state = tnetstring.parse(tag, memoryview(raw))
    del raw
    if not isinstance(state, dict):
        raise _Bad(f"a {type(state).__name__}, not a flow")
    if "version" not in state:
        raise _Bad("a record without a flow format version")
    return _migrated(state)


def _migrated(state: dict[Any, Any]) -> dict[str, Any]:
    """`compat.migrate_flow`, step by step, refusing a record whose version a step does not move on: one holding
    both a text and a byte-string `version` key (each converter sets the text one, the loop reads the other)
    made mitmproxy's own loop run forever, and ingest with it."""
    done: set[Any] = set()
    while True:
        found: Any = state.get(b"version", state.get("version"))
        step = found if isinstance(found, int) else tuple(found)[:2]
        if step == version.FLOW_FORMAT_VERSION:
            return cast(dict[str, Any], state)  # a flow state has str keys
        if step in done:
            raise _Bad(f"a record whose flow format version stays {step!r} through its migration")
        if step not in compat.converters:
            return cast(dict[str, Any], compat.migrate_flow(state))  # raises mitmproxy's own ValueError for it
        done.add(step)
        state = compat.converters[step](state)


@dataclass
class Position:
    """Where a reader is: byte offset and flows read, for progress and error messages."""

    offset: int = 0
    flows: int = 0


def read(
    path: Path,
    max_body: int = DEFAULT_MAX_BODY,
    start: int = 0,
    end: int | None = None,
    position: Position | None = None,
    skipped: Skipped | None = None,
) -> Iterator[HttpExchange]:
    """The HTTP exchanges of the records in bytes [start, end) of a flow file; `position` follows the reader.
    A record whose contents cannot become an exchange (wrong types, a failed migration, nesting too deep) costs
    only itself: `skipped` is told its offset and why, and reading goes on with the next record. Where the
    records' framing itself stops making sense (a truncated file, an absurd length), Damaged is raised with its
    offset, after the exchanges before it."""
    pos = position if position is not None else Position()
    pos.offset = start
    with opened(path, start, end) as found:
        if found is None:
            return
        try:
            yield from _records(*found, pos, max_body, skipped)
        except Shrank as e:
            raise Damaged(pos.offset, f"{e}; ingest it again once whole") from None


def _records(
    fb: FileBytes, stop_at: int, fd: int, pos: Position, max_body: int, skipped: Skipped | None
) -> Iterator[HttpExchange]:
    size = len(fb)
    while pos.offset < stop_at:
        offset = pos.offset
        if os.fstat(fd).st_size < size:  # noticed between records, as well as by a short read within one
            raise Shrank(f"the file shrank below {size} bytes while it was read")
        try:
            start, stop, tag = _head(fb, offset, size)
            if tag not in _TAGS:
                raise _Bad(f"a record ending in {bytes([tag])!r}, not a type tag")
        except (_Bad, ValueError) as e:
            resume = _resync(fb, offset, size) if skipped is not None else None
            if resume is None or skipped is None:
                raise Damaged(offset, f"{e}; the file looks truncated or corrupt") from e
            skipped(offset, f"{e}: bytes {offset}-{resume} are not records; reading resumed at the next record")
            pos.offset = resume
            continue
        try:
            if tag != _DICT:
                raise _Bad(f"a record of type {chr(tag)!r}, not a flow")
            buf, base = fb.record(offset, stop + 1)
            exchange = _exchange(buf, start - base, stop - base, tag, max_body)
        except Shrank:
            raise
        except Exception as e:  # the record's own content, whatever it provokes (mitmproxy's migration too)
            exchange = None
            if skipped is None:
                raise Damaged(offset, _why(e)) from e
            # a record cut short and written after (`-w +file` after a kill): its prefix claims bytes of the next
            # record, and its end lands inside it. No record head there: read on from the next whole record
            resume = None if _head_at(fb, stop + 1, size) else _resync(fb, offset, size)
            if resume is not None and resume <= stop:
                skipped(
                    offset, f"{_why(e)}: bytes {offset}-{resume} are not records; reading resumed at the next record"
                )
                pos.offset = resume
                pos.flows += 1
                continue
            skipped(offset, _why(e))
        pos.offset = stop + 1
        pos.flows += 1
        if exchange is not None:
            yield exchange


def _head_at(fb: FileBytes, at: int, size: int) -> bool:
    """Whether a flow record can start at `at`: the end of the file, or a length prefix whose value ends as a dict
    (inside a record, what follows a value is a key: a string)."""
    if at >= size:
        return True
    try:
        return _head(fb, at, size + 1)[2] == _DICT
    except (_Bad, ValueError, IndexError):
        return False


class _InMemory(bytes):
    """Bytes read into memory, readable where `_resync` reads a file (`FileBytes`)."""

    def view(self, start: int, stop: int) -> tuple[bytes, int]:
        return self, 0


def holds_a_record(data: bytes) -> bool:
    """Whether `data` (a file's first bytes, which do not start as a record) holds a whole flow record, as
    `_resync` finds one after damage. A flow file whose first bytes are damaged is one still (its reader resumes
    at that record), not "not a capture"."""
    return _resync(_InMemory(data), -1, len(data)) is not None


def _resync(mm: FileBytes | _InMemory, offset: int, size: int) -> int | None:
    """Where the next whole flow record starts after damage at `offset`: mitmproxy ends every record with its
    `version` (`7:version;2:21#}`); from such an ending, the record's start is the one length prefix before it that
    announces exactly that length. None when no whole record follows."""
    at = offset
    budget = [_RESYNC_BUDGET]  # colons looked at, in all: a file of crafted endings cannot make this quadratic
    while (v := mm.find(b"7:version;", at + 1, size)) >= 0 and budget[0] > 0:
        at = v
        try:
            _vs, ve, vt = _head(mm, v + 10, size)
            if vt != _INT or mm[ve + 1] != _DICT:
                continue
        except (_Bad, ValueError, IndexError):
            continue
        begin = _start_of(mm, offset, ve + 1, budget)
        if begin is not None:
            return begin
    return None


def _start_of(mm: FileBytes | _InMemory, after: int, end: int, budget: list[int]) -> int | None:
    """The start (> `after`) of the value whose tag is at `end`: a `<digits>:` whose number is the bytes between.
    (Searched backwards a read at a time: crafted endings make this millions of colons.)"""
    colon = end
    while colon > after + 1:
        data, base = mm.view(max(after + 1, colon - CHUNK), colon)
        lo = max(after + 1, base)
        while (at := data.rfind(b":", lo - base, colon - base)) >= 0:
            colon = base + at
            budget[0] -= 1
            if budget[0] <= 0:
                return None
            first = max(after + 1, colon - 20)  # the (at most 20) bytes before the colon
            before = data[first - base : at] if first >= base else mm[first:colon]
            run = len(before)
            while run > 0 and 48 <= before[run - 1] <= 57:  # ASCII digits
                run -= 1
            for k in range(len(before) - run, 0, -1):  # the digits, maybe preceded by others: the longest that fits
                if int(before[-k:]) == end - colon - 1:
                    return colon - k
        colon = lo
    return None


def _exchange(mm: Any, start: int, stop: int, tag: int, max_body: int) -> HttpExchange | None:
    """The exchange of one record, None for a flow that is not HTTP."""
    state = _state(mm, start, stop, max_body)
    if state is None:
        state = _whole(mm, start, stop, tag)
    if state.get("type") != "http":
        return None
    state, anomalies = checked(state)
    exchange = exchange_from_state(state, max_body, "ingest")
    exchange.anomalies.extend(anomalies)
    return exchange


def _why(e: Exception) -> str:
    if isinstance(e, RecursionError):
        return "unreadable flow (values nested too deep)"
    if isinstance(e, (_Bad, BadRecord)):
        return f"unreadable flow ({e})"
    return f"unreadable flow ({type(e).__name__}: {str(e)[:200]})"
