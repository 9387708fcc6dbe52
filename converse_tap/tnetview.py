"""Reading tnetstrings (`<length>:<payload><tag>`, mitmproxy's flow file encoding) in place: a value's payload and
tag located from its length prefix, a dict's entries located without reading their values, values parsed as
mitmproxy's `tnetstring` module gives them. `buf` is `bytes` or anything indexable as bytes (`capturefile.FileBytes`).
"""

from __future__ import annotations

import re
from typing import Any

BYTES, STR, INT, FLOAT, BOOL, NULL, LIST, DICT = b",;#^!~]}"
TAGS = frozenset(b",;#^!~]}")
KEY_TAGS = (STR, BYTES)
MAX_HEADERS = 10_000  # header fields of one request or response
MAX_KEYS = 4096  # keys of one dict read by the fast reader (a flow's state has about 20)


# an entry whose key is ASCII text of letters, digits and `_` (every key mitmproxy writes), and its value's head
_ENTRY = re.compile(rb"(\d{1,20}):([A-Za-z0-9_]{1,64});(\d{1,20}):")

# a header field [name, value] whose name is a token (RFC 9110), up to its value's head
_HEADER = re.compile(rb"(\d{1,20}):(\d{1,20}):([!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}),(\d{1,20}):")


class Bad(ValueError):
    """A record outside what the partial read takes (a key that is not text, a malformed header list): it is
    parsed whole instead, as mitmproxy reads it, and judged by `flowstate.checked`."""


class TooLarge(Bad):
    """A value past one of the fast reader's bounds: costs the record, unparsed."""


def head(buf: Any, pos: int, end: int) -> tuple[int, int, int]:
    """The payload [start, stop) and type tag of the value whose length prefix starts at `pos`, inside [.., end)."""
    colon = buf.find(b":", pos, pos + 21)
    if colon <= pos:
        raise Bad("missing or invalid length prefix")
    digits = buf[pos:colon]
    if not digits.isdigit():
        raise Bad(f"invalid length prefix {digits[:20]!r}")
    start = colon + 1
    stop = start + int(digits)
    if stop >= end:
        raise Bad(f"a value of {int(digits)} bytes runs past the end of its record")
    return start, stop, buf[stop]


def fields(buf: Any, start: int, stop: int, until: bytes = b"") -> dict[bytes, tuple[int, int, int]]:
    """The entries of a dict payload: key -> (start, stop, tag) of the value, values not read; a repeated key's
    last value, as mitmproxy's reader keeps it; with `until`, the entries up to that key only. Keys must be ASCII
    text (`;`): any other key (a byte string, which mitmproxy's reader keeps apart from the text of the same bytes, a
    number, text that may not be UTF-8) is Bad, for the record to be parsed whole. (`head` inlined: this loop is
    most of the reader's time. In `bytes`, entries as mitmproxy writes them are matched whole, about a third
    faster; at the first that is not, the walk reads the dict again from its start: it alone says what is Bad.)"""
    out = {}
    pos = start
    if not until and type(buf) is bytes:  # as mitmproxy writes: one match per entry, the walk below for the rest
        match = _ENTRY.match
        while pos < stop:
            m = match(buf, pos)
            if m is None:
                break
            klen, key, vlen = m.groups()
            ve = m.end() + int(vlen)
            if int(klen) != len(key) or ve >= stop:
                break
            out[key] = (m.end(), ve, buf[ve])
            pos = ve + 1
            if len(out) > MAX_KEYS:
                raise TooLarge(f"a dict of more than {MAX_KEYS} keys")
        else:
            return out
        out, pos = {}, start
    find = buf.find
    while pos < stop:
        colon = find(b":", pos, pos + 21)
        if colon <= pos:
            raise Bad("missing or invalid length prefix")
        ks = colon + 1
        ke = ks + int(buf[pos:colon])
        if ke >= stop or ke < ks or buf[ke] != STR:
            raise Bad("a dict key that is not text")
        pos = ke + 1
        colon = find(b":", pos, pos + 21)
        if colon <= pos:
            raise Bad("missing or invalid length prefix")
        vs = colon + 1
        ve = vs + int(buf[pos:colon])
        if ve >= stop or ve < vs:
            raise Bad("a value runs past the end of its dict")
        key = buf[ks:ke]
        out[key] = (vs, ve, buf[ve])
        pos = ve + 1
        if key == until:
            break
        if len(out) > MAX_KEYS:
            raise TooLarge(f"a dict of more than {MAX_KEYS} keys")
    if not b"".join(out).isascii():
        raise Bad("a dict key that is not ASCII")
    return out


def value(buf: Any, start: int, stop: int, tag: int) -> Any:
    """A value parsed whole, as mitmproxy's tnetstring reader gives it."""
    if tag == BYTES:
        return buf[start:stop]
    if tag == STR:
        return buf[start:stop].decode("utf-8")
    if tag == INT:
        return int(buf[start:stop])
    if tag == FLOAT:
        return float(buf[start:stop])
    if tag == NULL:
        if stop != start:
            raise Bad("invalid null literal")
        return None
    if tag == BOOL:
        raw = buf[start:stop]
        if raw not in (b"true", b"false"):
            raise Bad(f"invalid boolean literal {raw[:10]!r}")
        return raw == b"true"
    if tag == LIST:
        items = []
        pos = start
        while pos < stop:
            s, e, t = head(buf, pos, stop)
            items.append(value(buf, s, e, t))
            pos = e + 1
        return items
    if tag == DICT:
        return {k.decode("utf-8", "surrogateescape"): value(buf, *v) for k, v in fields(buf, start, stop).items()}
    raise Bad(f"unknown type tag {tag}")


def headers(buf: Any, start: int, stop: int) -> list[tuple[bytes, bytes]]:
    """A list of [name, value] byte-string pairs (`head` inlined, and fields as written matched whole, as in
    `fields`)."""
    out: list[tuple[bytes, bytes]] = []
    pos = start
    if type(buf) is bytes:  # a name that is a token, as written: one match per field, the walk below for the rest
        match = _HEADER.match
        while pos < stop:
            m = match(buf, pos)
            if m is None:
                break
            plen, nlen, name, vlen = m.groups()
            ve = m.end() + int(vlen)
            pe = m.start(2) + int(plen)
            if int(nlen) != len(name) or ve + 1 != pe or pe >= stop or buf[ve] != BYTES or buf[pe] != LIST:
                break
            out.append((name, buf[m.end() : ve]))
            if len(out) > MAX_HEADERS:
                raise TooLarge(f"more than {MAX_HEADERS} header fields")
            pos = pe + 1
        else:
            return out
        out, pos = [], start
    find = buf.find
    while pos < stop:
        colon = find(b":", pos, pos + 21)
        if colon <= pos:
            raise Bad("missing or invalid length prefix")
        ps = colon + 1
        pe = ps + int(buf[pos:colon])
        colon = find(b":", ps, ps + 21)
        if colon <= ps or pe >= stop:
            raise Bad("a header that is not a pair of byte strings")
        ns = colon + 1
        ne = ns + int(buf[ps:colon])
        colon = find(b":", ne + 1, ne + 22)
        if colon <= ne + 1:
            raise Bad("a header that is not a pair of byte strings")
        vs = colon + 1
        ve = vs + int(buf[ne + 1 : colon])
        if ve + 1 != pe or buf[pe] != LIST or buf[ne] != BYTES or buf[ve] != BYTES or ne < ns or ve < vs:
            raise Bad("a header that is not a pair of byte strings")
        out.append((buf[ns:ne], buf[vs:ve]))
        if len(out) > MAX_HEADERS:
            raise TooLarge(f"more than {MAX_HEADERS} header fields")
        pos = pe + 1
    return out
