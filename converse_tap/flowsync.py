"""Finding the next whole record of a flow file after damage (a truncated record, a damaged length prefix, bytes
between records), so that damage costs only the records it touches: the records after it are read, and records that
a damaged record holds in a body (an upload of a capture) are not taken for the file's own."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from .capturefile import CHUNK, FileBytes
from .tnetview import DICT, INT, KEY_TAGS, MAX_KEYS, Bad, head

RESYNC_BUDGET = 4_000_000  # colons examined to find the record after damage; past it, the rest is reported damaged


def head_at(fb: FileBytes | InMemory, at: int, size: int) -> bool:
    """Whether a flow record can start at `at`: the end of the file, or a length prefix whose value ends as a dict
    (inside a record, what follows a value is a key: a string)."""
    if at >= size:
        return True
    try:
        return head(fb, at, size + 1)[2] == DICT
    except (Bad, ValueError, IndexError):
        return False


class InMemory(bytes):
    """Bytes read into memory, readable where `resync` reads a file (`FileBytes`)."""

    def view(self, start: int, stop: int) -> tuple[bytes, int]:
        return self, 0


def holds_a_record(data: bytes) -> bool:
    """Whether `data` (a file's first bytes, which do not start as a record) holds a whole flow record, as
    `resync` finds one after damage. A flow file whose first bytes are damaged is one still (its reader resumes
    at that record), not "not a capture"."""
    return resync(InMemory(data), -1, len(data)) is not None


def resync(mm: FileBytes | InMemory, offset: int, size: int) -> int | None:
    """Where the next whole flow record starts after damage at `offset`. A record whose length prefix alone is
    damaged is walked entry by entry to its end (`_walked`): the record that ends there if one starts after the
    damage (or the first of the records chained to it, which the walk jumped over), else what follows it; the
    records a damaged record's body holds (an upload of a capture) are not taken for records of the file
    (`_holding`, `_near_claim`), unless records chain exactly to where its length says it ends (it was cut short).
    Otherwise: mitmproxy ends every record with its `version` (`7:version;2:21#}`); from such an ending, the
    record's start is the one length prefix before it that announces exactly that length. None when no whole record
    follows."""
    budget = [RESYNC_BUDGET]  # colons looked at, in all: a file of crafted endings cannot make this quadratic
    near = None
    if offset >= 0:
        walked = _walked(mm, offset, size, budget)
        if walked is not None:
            return walked
        near = _near_claim(mm, offset, size)
    at = offset
    while (v := mm.find(b"7:version;", at + 1, size)) >= 0 and budget[0] > 0:
        at = v
        end = _version_end(mm, v, size)
        if end is None:
            continue
        begin = start_of(mm, offset, end, budget)
        if begin is not None:
            outer = _holding(mm, offset, begin, end, size, budget)
            begin = outer if outer is not None else begin
            if near is not None and begin < near and not _chains_to(mm, begin, near, size):
                if head(mm, begin, size + 1)[1] >= near:
                    return begin  # a whole record across `near`: the damaged record does not end there
                # what was found lies inside the damaged record, which ends where its length says, unless records
                # end exactly there one after another (it was cut short, and bytes of the next records make up
                # the difference): then they are the file's
                back = _chained_back(mm, begin, near, partial(start_of, mm, begin, budget=budget))
                return back if back is not None else near
            return begin
    return None


SLACK = 64  # bytes between where a damaged record's length says it ends and a flow record's ending it may end at
_CHAIN = 32 << 20  # bytes of records walked from a resync point to where the damaged record may end


def _near_claim(mm: FileBytes | InMemory, offset: int, size: int) -> int | None:
    """Where the damaged record at `offset` ends if a few bytes of it were lost or added: after the flow record's
    ending (followed by a record or the end of the file) nearest to where its length prefix says it ends."""
    colon = mm.find(b":", offset, offset + 21)
    digits = mm[offset:colon] if colon > offset else b""
    if not digits.isdigit():
        return None
    claim = colon + 1 + int(digits)  # where its tag would be
    best = None
    at = max(colon, claim - SLACK - 20)
    while (v := mm.find(b"7:version;", at, min(size, claim + SLACK))) >= 0:
        at = v + 1
        stop = _version_end(mm, v, size)
        if stop is None or abs(stop - claim) > SLACK:
            continue
        if head_at(mm, stop + 1, size) and (best is None or abs(stop - claim) < abs(best - 1 - claim)):
            best = stop + 1
    return best


def _chains_to(mm: FileBytes | InMemory, at: int, target: int, size: int) -> bool:
    """Whether records follow one another from `at` to exactly `target` (or on for more than _CHAIN bytes): then
    `target` is a record boundary of theirs, not the end of a damaged record holding them."""
    limit = at + _CHAIN
    while at < target:
        if at > limit:
            return True
        try:
            _start, stop, tag = head(mm, at, size)
        except (Bad, ValueError):
            return False
        if tag != DICT:
            return False
        at = stop + 1
    return at == target


def ending_at(mm: FileBytes | InMemory, offset: int, end: int) -> int | None:
    """Where, after `offset`, flow records begin that follow one another to exactly `end`: a damaged record that
    seems to end at `end` (its length prefix lands on a dict's end followed by a record) was cut short, and the
    records after the cut are the file's; None when none does. One pass of a regular expression over the bytes
    per record found, not a look at every colon: an unreadable record is not read again at Python speed."""
    return _chained_back(mm, offset, end, partial(_flow_ending, mm, offset))


# after a flow record's length prefix, its first key: a name, as text or (in old formats) bytes. A literal first,
# for the regular expression engine to skip ahead to each colon at C speed.
_FIRST_KEY = re.compile(rb":\d{1,2}:\w{1,64}[;,]")


def _flow_ending(mm: FileBytes | InMemory, after: int, tag: int) -> int | None:
    """The last start in (after, tag) of a flow record's head whose length prefix puts its tag at `tag`."""
    found = None
    pos = after + 1
    while pos < tag:
        stop = min(tag, pos + CHUNK)
        data, base = mm.view(max(after + 1, pos - 20), min(tag, stop + 100))  # with a head's digits and first key
        for m in _FIRST_KEY.finditer(data, pos - base, min(len(data), tag - base)):
            colon = base + m.start()
            if colon >= stop:
                break
            before = data[max(0, after + 1 - base, m.start() - 20) : m.start()]  # (a view may start before `after`)
            begin = _announcing(before, colon, tag)
            if begin is not None:
                found = begin
        pos = stop
    return found


def _chained_back(mm: FileBytes | InMemory, after: int, end: int, start: Callable[[int], int | None]) -> int | None:
    """The first of the records after `after` that follow one another to exactly `end`, each found by `start`
    (the start of the value whose tag is at a position: `start_of`, or `_flow_ending`); None when no record ends
    at `end`."""
    first = None
    while end > after + 1 and mm[end - 1] == DICT and (begin := start(end - 1)) is not None:
        first = end = begin
    return first


def _holding(mm: FileBytes | InMemory, offset: int, begin: int, end: int, size: int, budget: list[int]) -> int | None:
    """The first start in (offset, begin) of a record that ends past `end` with a flow record's ending: a record
    holding the one found at `begin` in a value (a capture uploaded in a body), which is the file's record."""
    pos = offset + 1
    while (colon := mm.find(b":", pos, begin)) >= 0:
        pos = colon + 1
        budget[0] -= 1
        if budget[0] <= 0:
            return None
        before = mm[max(offset + 1, colon - 20) : colon]
        for k in range(_digits(before), 0, -1):  # the longest digits first: the earliest start
            stop = colon + 1 + int(before[-k:])
            if end < stop < size and mm[stop] == DICT and _ends_as_flow(mm, stop, size):
                return colon - k
    return None


def _ends_as_flow(mm: FileBytes | InMemory, stop: int, size: int) -> bool:
    """Whether the `}` at `stop` ends a flow record: after its `version` (`7:version;2:21#}`)."""
    at = mm.rfind(b"7:version;", max(0, stop - 40), stop)
    return at >= 0 and _version_end(mm, at, size) == stop


def _version_end(mm: FileBytes | InMemory, at: int, size: int) -> int | None:
    """Where the `}` is that ends a record after the `7:version;` at `at` and its integer value; None if none does."""
    try:
        _vs, ve, vt = head(mm, at + 10, size)
        return ve + 1 if vt == INT and ve + 1 < size and mm[ve + 1] == DICT else None
    except (Bad, ValueError, IndexError):
        return None


def _announcing(before: bytes, colon: int, tag: int) -> int | None:
    """The start of a length prefix ending at `colon` whose number puts its value's tag at `tag`: the digits
    `before` ends with, maybe preceded by others, the longest that fits; None when none does."""
    for k in range(_digits(before), 0, -1):
        if colon + 1 + int(before[-k:]) == tag:
            return colon - k
    return None


def _digits(before: bytes) -> int:
    """How many ASCII digits `before` ends with."""
    run = len(before)
    while run > 0 and 48 <= before[run - 1] <= 57:
        run -= 1
    return len(before) - run


def _walked(mm: FileBytes | InMemory, offset: int, size: int, budget: list[int]) -> int | None:
    """After a record at `offset` whose length prefix is damaged: the payload after its colon walked as the entries
    of a dict to a `}` followed by the end of the file or by a record's head. Where a record ending there starts
    after `offset` if one does (digits before the colon giving its length: a byte before the prefix; or a whole
    record after one cut short, which the walk ran into), else where the next one does; None when the payload is
    no such dict."""
    colon = mm.find(b":", offset, offset + 21)
    if colon < offset:
        return None
    pos = colon + 1
    try:
        for _ in range(2 * MAX_KEYS):
            if mm[pos] == DICT:
                if not head_at(mm, pos + 1, size):
                    return None
                begin = start_of(mm, offset, pos, budget)
                if begin is None:
                    return pos + 1
                # the records the walk jumped over, if any
                back = _chained_back(mm, offset, begin, partial(start_of, mm, offset, budget=budget))
                return back if back is not None else begin
            _ks, ke, kt = head(mm, pos, size)
            if kt not in KEY_TAGS:
                return None
            _vs, ve, _vt = head(mm, ke + 1, size)
            pos = ve + 1
    except (Bad, ValueError, IndexError):
        return None
    return None


def start_of(mm: FileBytes | InMemory, after: int, end: int, budget: list[int]) -> int | None:
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
            begin = _announcing(before, colon, end)
            if begin is not None:
                return begin
        colon = lo
    return None
