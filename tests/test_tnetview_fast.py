"""The tnetstring walk's fast paths (one regular-expression match per dict entry or header field, taken on `bytes`
as mitmproxy writes them) read exactly what the byte-by-byte walk reads, and fail where and as it fails.

The walk is forced by a `bytes` subclass: it answers `find`, indexes and slices as `bytes`, but is not `bytes`
itself, as a record read piece by piece (`capturefile.FileBytes`) is not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mitmproxy.io import tnetstring
from mitmproxy.test import tflow

from converse_tap import tnetview
from tests.factories import a2a_flow, agent_message, jsonrpc_result


class _Walked(bytes):
    """The same bytes, read by the walk."""


def _outcome(read: Any, buf: bytes, start: int, stop: int) -> Any:
    try:
        return read(buf, start, stop)
    except ValueError as e:
        return (type(e).__name__, str(e))


def _same(read: Any, raw: bytes, start: int, stop: int) -> Any:
    fast = _outcome(read, raw, start, stop)
    assert fast == _outcome(read, _Walked(raw), start, stop)
    return fast


def _records() -> list[bytes]:
    flows: list[Any] = [a2a_flow(response=jsonrpc_result({"message": agent_message()})), tflow.tflow(resp=True)]
    flows += [tflow.twebsocketflow(), tflow.ttcpflow(), tflow.tdnsflow(resp=True)]
    return [tnetstring.dumps(f.get_state()) for f in flows]


def _dicts_and_headers(raw: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The dicts and the header lists of a record, as the reader meets them."""
    s, e, _ = tnetview.head(raw, 0, len(raw))
    dicts, headers = [(s, e)], []
    for key, (vs, ve, vt) in tnetview.fields(raw, s, e).items():
        if vt == tnetview.DICT and key in (b"request", b"response", b"server_conn", b"websocket"):
            dicts.append((vs, ve))
            inner = tnetview.fields(raw, vs, ve)
            if b"headers" in inner:
                headers.append(inner[b"headers"][:2])
    return dicts, headers


@pytest.mark.parametrize("raw", _records(), ids=["a2a", "http", "websocket", "tcp", "dns"])
def test_records_as_written_read_the_same_both_ways(raw: bytes) -> None:
    dicts, headers = _dicts_and_headers(raw)
    assert len(dicts) >= 2
    for start, stop in dicts:
        assert isinstance(_same(tnetview.fields, raw, start, stop), dict)
    for start, stop in headers:
        assert _same(tnetview.headers, raw, start, stop)


@pytest.mark.parametrize(
    ("entries", "want"),
    [
        ([b"4:Host;", b"1:a,"], {b"Host": (9, 10, tnetview.BYTES)}),  # letters of both cases
        ([b"4:x_2y;", b"1:a,", b"4:x_2y;", b"2:bc,"], {b"x_2y": (20, 22, tnetview.BYTES)}),  # repeated: the last
        ([b"04:host;", b"01:a,"], {b"host": (11, 12, tnetview.BYTES)}),  # leading zeros
        ([b"+4:host;", b"1:a,"], {b"host": (10, 11, tnetview.BYTES)}),  # what only `int` takes
        ([b"1_0:abcdefghij;", b"1:a,"], {b"abcdefghij": (17, 18, tnetview.BYTES)}),
        ([b"12:content-type;", b"1:a,"], {b"content-type": (18, 19, tnetview.BYTES)}),  # not the fast path's
        ([b"0:;", b"1:a,"], {b"": (5, 6, tnetview.BYTES)}),
        ([b"5:host;", b"1:a,"], ("Bad", "a dict key that is not text")),  # a key length that lies
        ([b"4:host;", b"9:a,"], ("Bad", "a value runs past the end of its dict")),
        ([b"4:host,", b"1:a,"], ("Bad", "a dict key that is not text")),
        ([b"2:\xc3\xa9;", b"1:a,"], ("Bad", "a dict key that is not ASCII")),
        ([b"4:host;", b"x:a,"], ("ValueError", "invalid literal for int() with base 10: b'x'")),
    ],
)
def test_dict_entries_off_the_fast_path_read_as_the_walk_reads_them(entries: list[bytes], want: Any) -> None:
    raw = b"".join(entries)
    assert _same(tnetview.fields, raw, 0, len(raw)) == want


def _pairs(*pairs: tuple[bytes, bytes]) -> bytes:
    return b"".join(tnetstring.dumps(list(p)) for p in pairs)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (_pairs((b"Host", b"a.b:c.d"), (b"x-Y_1", b"")), [(b"Host", b"a.b:c.d"), (b"x-Y_1", b"")]),
        (_pairs((b"x y z", b"v,]")), [(b"x y z", b"v,]")]),  # a name that is no token: the walk
        (_pairs((b"a,b", b"v,v")), [(b"a,b", b"v,v")]),  # a comma in the name
        (_pairs((b"\xc3\xa9t\xc3", b"v")), [(b"\xc3\xa9t\xc3", b"v")]),  # bytes that are not text
        (_pairs((b"", b"abc")), [(b"", b"abc")]),
        (b"12:1:a,3:abc,]", ("Bad", "a header that is not a pair of byte strings")),  # a pair length that lies
        (b"10:1:a,3:abc;]", ("Bad", "a header that is not a pair of byte strings")),  # text, not bytes
        (b"10:1:a,3:abc,}", ("Bad", "a header that is not a pair of byte strings")),
        (b"10:2:a,3:abc,]", ("Bad", "a header that is not a pair of byte strings")),
        (b"10:1:a,3:abc,]1", ("Bad", "missing or invalid length prefix")),
    ],
)
def test_header_fields_off_the_fast_path_read_as_the_walk_reads_them(raw: bytes, want: Any) -> None:
    assert _same(tnetview.headers, raw, 0, len(raw)) == want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_record_reads_the_same_both_ways(data: st.DataObject) -> None:
    """A byte of a real record replaced or removed, or a stretch repeated: the same entries, or the same error."""
    raw = bytearray(data.draw(st.sampled_from(_RECORDS)))
    dicts, headers = _dicts_and_headers(bytes(raw))
    start, stop = data.draw(st.sampled_from(dicts + headers))
    at = data.draw(st.integers(start, stop - 1))
    how = data.draw(st.sampled_from(["replace", "remove", "repeat"]))
    if how == "replace":
        raw[at] = data.draw(st.sampled_from(b"0123456789:;,]}#~-_ aZ\xff"))
    elif how == "remove":
        del raw[at]
        stop -= 1
    else:
        piece = bytes(raw[at : at + data.draw(st.integers(1, 40))])
        raw[at:at] = piece
        stop += len(piece)
    mutated = bytes(raw)
    _same(tnetview.fields, mutated, start, stop)
    _same(tnetview.headers, mutated, start, stop)


_RECORDS = _records()
