"""Fast reader of mitmproxy flow files (`mitmdump -w`): only what ingest needs, straight from the file's bytes.

A flow file is a sequence of tnetstrings (`<length>:<payload><tag>`), one per flow, each the dict of an
`HTTPFlow.get_state()`. Every value carries its length, so a record's fields can be located by walking length
prefixes, and a value ingest does not need (certificates, connection details, a body past `max_body`) is skipped
unparsed (in a record larger than 8 MiB, unread); WebSocket messages are counted, not read, and flows of another
type (tcp, udp, dns) counted by type (`Position`), for the report to say what ingest did not read. The file is
read with `pread` a megabyte at a time (`capturefile.FileBytes`), never memory-mapped, so memory stays bounded
whatever the size of the file or of one record, and a file truncated while it is read is reported, not a SIGBUS.

Records of the current flow format (mitmproxy's `FLOW_FORMAT_VERSION`) are read this way; records of older
formats, and any record whose shape the partial read does not take (a key that is not ASCII text, a repeated
connection address, a malformed header list), are parsed whole by mitmproxy's tnetstring module and migrated by its
`compat` module, as `io.FlowReader` does. Either way the exchange is built by `exchange_from_state`, from a state
dict holding the fields it reads, checked by `flowstate.checked`: `tests/test_ingest_exact.py` holds the two paths
to the same rows, `tests/fuzz/test_flowfile_differential.py` to the same reading of mutated records. Damage to the
file's framing is passed over by `flowsync`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from mitmproxy import version
from mitmproxy.io import compat, tnetstring

from .a2a.exchange import HttpExchange
from .addon.flows import DEFAULT_MAX_BODY, PREFIX, exchange_from_state
from .capturefile import FileBytes, Shrank, opened
from .flowstate import BadRecord, checked
from .flowsync import ending_at, head_at, resync
from .tnetview import BYTES, DICT, INT, LIST, NULL, TAGS, Bad, TooLarge
from .tnetview import fields as _fields
from .tnetview import head as _head
from .tnetview import headers as _headers
from .tnetview import value as _value

MAX_SCALAR = 1024 * 1024  # bytes of a field that is not a body or a header list (a path, a timestamp, an error)
MAX_WHOLE_CONTAINERS = 1_000_000  # lists and dicts of an older-format record (counted as `]` and `}` bytes)
MAX_WHOLE = 64 * 1024 * 1024  # a record of an older format is parsed whole: above this, it is not read

Skipped = Callable[[int, str], None]  # (byte offset, why): a record that cannot be read, the next one is


class Damaged(Exception):
    """A record that cannot be read, at byte `offset` of the file."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset, self.reason = offset, reason


_SCALARS = (b"method", b"scheme", b"host", b"port", b"path", b"http_version", b"status_code")
_TIMES = (b"timestamp_start", b"timestamp_end")


def _small(buf: Any, loc: tuple[int, int, int]) -> Any:
    """A value that should be a scalar or a short list (a timestamp, a host, an address), parsed whole unless it is
    larger than any such value can be: then costs the record, instead of memory."""
    start, stop, tag = loc
    if stop - start > MAX_SCALAR:
        raise TooLarge(f"a field of {stop - start} bytes where a short value belongs")
    return _value(buf, start, stop, tag)


def _message(buf: Any, loc: tuple[int, int, int], max_body: int, trailers: bool) -> Any:
    """The request or response fields `exchange_from_state` reads (`trailers`: the response's, gRPC's status); a
    body above `max_body` as its size and prefix. Values of the wrong type are passed on for `flowstate.checked` to
    judge, never parsed past a bounded size."""
    start, stop, tag = loc
    if tag != DICT:
        return _small(buf, loc) if tag != LIST else []
    fields = _fields(buf, start, stop)
    out: dict[str, Any] = {}
    for key in _SCALARS:
        if key in fields:
            out[key.decode()] = _small(buf, fields[key])
    for key in _TIMES:
        if key in fields:
            out[key.decode()] = _small(buf, fields[key])
    for key in (b"headers", b"trailers") if trailers else (b"headers",):
        if key in fields:
            hs, he, ht = fields[key]
            out[key.decode()] = _headers(buf, hs, he) if ht == LIST else _small(buf, fields[key])
    if b"content" in fields:
        cs, ce, ct = fields[b"content"]
        if ct == BYTES and ce - cs > max_body:
            out["content"] = buf[cs : min(ce, cs + PREFIX)]  # a body below PREFIX: its own bytes, not the next
            out["content_size"] = ce - cs
        elif ct in (BYTES, NULL):
            out["content"] = _value(buf, cs, ce, ct)
        else:
            out["content"] = chr(ct)  # not a body: `checked` says so
    return out


_PEERNAME, _ADDRESS = b"8:peername;", b"7:address;"


def _conn(buf: Any, loc: tuple[int, int, int], keys: tuple[bytes, ...]) -> Any:
    """The addresses of a connection (`client_conn`, `server_conn`) that `exchange_from_state` reads; a value that
    is not a dict as it is, for `flowstate.checked` to judge."""
    start, stop, tag = loc
    if tag != DICT:
        return _small(buf, loc)
    found = _as_written(buf, start, stop, keys)
    if found is None:
        fields = _fields(buf, start, stop)
        found = {key: fields[key] for key in keys if key in fields}
    return {key.decode(): _small(buf, v) for key, v in found.items()}


def _as_written(buf: Any, start: int, stop: int, keys: tuple[bytes, ...]) -> dict[bytes, Any] | None:
    """The `peername` and `address` of a connection found where mitmproxy writes them, without walking its ~20
    entries: `peername` (a list or null) last, `address` among the first three; each named once in the dict's
    bytes, so that neither is a repeated key nor text inside a value (None otherwise: the entries are walked)."""
    if not isinstance(buf, bytes) or buf.count(_PEERNAME, start, stop) != 1:  # (a record of over 8 MiB: walked)
        return None
    at = buf.find(_PEERNAME, start, stop)
    try:
        vs, ve, vt = _head(buf, at + len(_PEERNAME), stop + 1)
    except (Bad, ValueError):
        return None
    if ve + 1 != stop or vt not in (LIST, NULL):
        return None
    out = {b"peername": (vs, ve, vt)}
    if b"address" in keys:
        if buf.count(_ADDRESS, start, stop) != 1:
            return None
        first = _fields(buf, start, stop, until=b"address")
        if b"address" not in first or len(first) > 3:
            return None
        out[b"address"] = first[b"address"]
    return out


def _state(buf: Any, start: int, stop: int, max_body: int) -> dict[str, Any] | None:
    """The fields of one record that `exchange_from_state` reads, or None for a record of another format version
    (read whole instead)."""
    fields = _fields(buf, start, stop)
    ver = fields.get(b"version")
    if ver is None or ver[2] != INT or int(buf[ver[0] : ver[1]]) != version.FLOW_FORMAT_VERSION:
        return None
    state: dict[str, Any] = {}
    for key in (b"type", b"id", b"error"):
        if key in fields:
            state[key.decode()] = _small(buf, fields[key])
    if state.get("type") != "http":
        return state
    if b"websocket" in fields:
        state["websocket"] = _messages(buf, fields[b"websocket"])
    state["request"] = _message(buf, fields[b"request"], max_body, False) if b"request" in fields else None
    state["response"] = _message(buf, fields[b"response"], max_body, True) if b"response" in fields else None
    if b"client_conn" in fields:
        state["client_conn"] = _conn(buf, fields[b"client_conn"], (b"peername",))
    if b"server_conn" in fields:
        state["server_conn"] = _conn(buf, fields[b"server_conn"], (b"address", b"peername"))
    return state


def _messages(buf: Any, loc: tuple[int, int, int]) -> int | None:
    """How many messages a flow's WebSocket data holds (their heads walked, never their payloads); None for a flow
    without any. Data of the wrong shape counts what it can: the record is judged by what ingest reads, not by
    this."""
    start, stop, tag = loc
    if tag != DICT:
        return None
    n = 0
    try:
        found = _fields(buf, start, stop).get(b"messages")
        if found is None or found[2] != LIST:
            return 0
        pos, end = found[0], found[1]
        while pos < end:
            pos = _head(buf, pos, end)[1] + 1
            n += 1
    except ValueError:  # (Bad, TooLarge, a length that is not a number)
        pass
    return n


def _whole(buf: Any, start: int, stop: int, tag: int) -> dict[str, Any]:
    """A record of an older format, or one the partial read does not take: parsed whole and migrated, as
    mitmproxy's FlowReader does. `content_size` is the fast reader's own note of a body it did not read (never a
    field of mitmproxy's): found in the file, it goes."""
    if stop - start > MAX_WHOLE:
        raise TooLarge(f"a record of another flow format or shape larger than {MAX_WHOLE >> 20} MiB is not parsed")
    raw = buf[start:stop]  # the parser copies it anyway
    if raw.count(b"]") + raw.count(b"}") > MAX_WHOLE_CONTAINERS:
        raise TooLarge(f"a record parsed whole of more than {MAX_WHOLE_CONTAINERS:,} lists and dicts")
    state = tnetstring.parse(tag, memoryview(raw))
    del raw
    if not isinstance(state, dict):
        raise Bad(f"a {type(state).__name__}, not a flow")
    if "version" not in state and b"version" not in state:  # (migrate_flow reads either)
        raise Bad("a record without a flow format version")
    state = _migrated(state)
    for key in ("request", "response"):
        if isinstance(state.get(key), dict):
            state[key].pop("content_size", None)
    return state


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
            raise Bad(f"a record whose flow format version stays {step!r} through its migration")
        if step not in compat.converters:
            return cast(dict[str, Any], compat.migrate_flow(state))  # raises mitmproxy's own ValueError for it
        done.add(step)
        state = compat.converters[step](state)


@dataclass
class Position:
    """Where a reader is: byte offset and flows read, for progress and error messages; `record`: the offset of the
    record of the exchange last given. What the records read held that ingest does not read: `not_http`, flows of
    another type (tcp, udp, dns) by type; `websocket`, the HTTP flows with WebSocket data and their messages."""

    offset: int = 0
    flows: int = 0
    record: int = 0
    not_http: dict[str, int] = field(default_factory=dict)
    websocket: list[int] = field(default_factory=lambda: [0, 0])  # [flows, messages]


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
            if tag not in TAGS:
                raise Bad(f"a record ending in {bytes([tag])!r}, not a type tag")
        except (Bad, ValueError) as e:
            resume = resync(fb, offset, size) if skipped is not None else None
            if resume is None or skipped is None:
                raise Damaged(offset, f"{e}; the file looks truncated or corrupt") from e
            skipped(offset, f"{e}: bytes {offset}-{resume} are not records; reading resumed at the next record")
            pos.offset = resume
            continue
        try:
            if tag != DICT:
                raise Bad(f"a record of type {chr(tag)!r}, not a flow")
            buf, base = fb.record(offset, stop + 1)
            exchange, ftype, messages = _exchange(buf, start - base, stop - base, tag, max_body)
        except Shrank:
            raise
        except Exception as e:  # the record's own content, whatever it provokes (mitmproxy's migration too)
            exchange, ftype = None, ""  # (unreadable: told to `skipped`, counted there)
            if skipped is None:
                raise Damaged(offset, _why(e)) from e
            # a record cut short and written after (`-w +file` after a kill): its prefix claims bytes of the next
            # records, and its end lands inside one (on a value that is not a dict, or with no record head after
            # it), or exactly where one ends (records chained to there are read): read on from the next whole record
            framed = tag == DICT and head_at(fb, stop + 1, size)
            resume = ending_at(fb, offset, stop + 1) if framed else resync(fb, offset, size)
            if resume is not None and offset < resume <= stop:  # (always forward)
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
            if messages is not None:
                pos.websocket[0] += 1
                pos.websocket[1] += messages
            pos.record = offset
            yield exchange
        elif ftype:
            pos.not_http[ftype] = pos.not_http.get(ftype, 0) + 1


def _exchange(mm: Any, start: int, stop: int, tag: int, max_body: int) -> tuple[HttpExchange | None, str, int | None]:
    """The exchange of one record (None for a flow that is not HTTP), the flow's type, and the messages of its
    WebSocket data (None without any)."""
    try:
        state = _state(mm, start, stop, max_body)
    except TooLarge:
        raise
    except ValueError:  # Bad, or a length prefix that is not a number
        state = None
    if state is None:
        state = _whole(mm, start, stop, tag)
        ws = state.get("websocket")
        if isinstance(ws, dict):
            state["websocket"] = len(ws["messages"]) if isinstance(ws.get("messages"), list) else 0
        else:
            state["websocket"] = None
    if state.get("type") != "http":
        return None, flow_type(state.get("type")), None
    messages = state.pop("websocket", None)  # (never read by `checked`)
    state, anomalies = checked(state)
    exchange = exchange_from_state(state, max_body, "ingest")
    exchange.anomalies.extend(anomalies)
    return exchange, "http", messages


def flow_type(value: Any) -> str:
    """A record's `type` as the report names it: mitmproxy's (tcp, udp, dns), any other short name as written,
    else `unknown`."""
    if isinstance(value, str) and value.isascii() and value.isidentifier() and len(value) <= 16:
        return value
    return "unknown"


def _why(e: Exception) -> str:
    if isinstance(e, RecursionError):
        return "unreadable flow (values nested too deep)"
    if isinstance(e, (Bad, BadRecord)):
        return f"unreadable flow ({e})"
    return f"unreadable flow ({type(e).__name__}: {str(e)[:200]})"
