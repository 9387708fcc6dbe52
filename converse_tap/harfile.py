"""HAR files read entry by entry: `log.entries` is streamed, so memory holds one entry, whatever the file's size.

Each entry becomes an HTTPFlow through mitmproxy's own HAR importer (`mitmproxy.io.har.request_to_flow`), with
timings taken from the entry; a timing that cannot be represented (not a number, infinite, out of any clock's
range) becomes unknown with an anomaly instead of costing the entry. An entry's exchange id is derived from its
content, so the same HAR ingested twice is recognised.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.io import har

from .a2a.envelope import clip
from .a2a.exchange import HttpExchange
from .addon.flows import DEFAULT_MAX_BODY, PREFIX, exchange_from_flow
from .capturefile import open_regular

CHUNK = 1 << 20
MAX_ENTRY = 32 << 20  # characters of a HAR entry (bodies included) held and parsed; a larger entry is passed over
MAX_CONTAINERS = 1_000_000  # '[' + 4 x '{' in a value read across chunks (in its strings too): past it, not parsed
MAX_HEADERS = 10_000  # header fields of a request or response
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_MAX_TS = 253_402_300_799.0  # 9999-12-31T23:59:59Z


@dataclass(frozen=True)
class Unreadable:
    """A JSON value passed over unparsed: `reason` says why."""

    reason: str


_IN_STRING = re.compile(r'["\\]')
_OUTSIDE = re.compile(r'["\[\]{}]|[^"\[\]{}\s,:]+')
_FLAT = re.compile(r'(?:[^"\[\]{}]++|\[[^"\[\]{}]*+\]|\{[^"\[\]{}]*+\})*+')
_BARE = re.compile(r'[^"\[\]{}\s,:]*')


class HarError(Exception):
    """`position` is where the file stops making sense (`line L column C`, `log.entries[i]`)."""

    def __init__(self, position: str, reason: str) -> None:
        super().__init__(f"{position}: {reason}")
        self.position, self.reason = position, reason


@dataclass
class HarPosition:
    offset: int = 0  # bytes of the file read so far
    entries: int = 0
    started: bool = False  # `log.entries` was found: the file is a HAR
    size: int = 0  # characters of the last entry


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # first: its mark begins with UTF-16 LE's
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def encoding_of(head: bytes) -> str:
    """The text encoding a HAR's first bytes announce: UTF-16 or UTF-32 by their byte-order mark, else UTF-8."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    return "utf-8-sig"


def _encoding(f: Any) -> str:
    head = f.read(4)
    f.seek(0)
    return encoding_of(head)


class _Text:
    """The file's text, decoded as it is read, with a cursor; consumed text is dropped but lines are counted."""

    def __init__(self, f: Any, pos: HarPosition) -> None:
        self.f, self.pos = f, pos
        self.decoder = codecs.getincrementaldecoder(_encoding(f))("surrogateescape")  # a byte no text: its entry
        self.buf = ""
        self.i = 0
        self.eof = False
        self.line = 1  # line number of buf[0]
        self.line_start = 0  # index in buf where that line starts (negative: it started in dropped text)
        self.want = CHUNK
        self.size = 0  # characters of the last value read

    def more(self) -> bool:
        if self.eof:
            return False
        data = self.f.read(self.want)
        self.pos.offset += len(data)
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            raise HarError(f"byte {self.pos.offset - len(data) + e.start}", "not UTF-8 text") from e
        if not data:
            self.eof = True
        if self.i > CHUNK:
            self.drop()
        self.buf += text
        return True

    def drop(self) -> None:
        """Forget the text consumed, keeping line numbers right (counted in place: no copy of that text)."""
        self.line += self.buf.count("\n", 0, self.i)
        last = self.buf.rfind("\n", 0, self.i)
        self.line_start = last + 1 - self.i if last >= 0 else self.line_start - self.i
        self.buf = self.buf[self.i :]
        self.i = 0

    def skip_space(self) -> None:
        while True:
            self.i = _SPACE.match(self.buf, self.i).end()  # type: ignore[union-attr]
            if self.i < len(self.buf) or not self.more():
                return

    def peek(self) -> str:
        self.skip_space()
        return self.buf[self.i : self.i + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"Expecting '{char}'" if char in ":,]}" else "Expecting value")
        self.i += 1

    def value(self) -> Any:
        """The next JSON value, read on until it is complete. A value that is valid JSON but cannot be held or parsed
        (larger than MAX_ENTRY, nested deeper than the parser recurses, a number of thousands of digits) is
        passed over without being held, and comes back as an `Unreadable` naming why."""
        self.skip_space()
        while True:
            try:
                doc, end = _DECODER.raw_decode(self.buf, self.i)
            except json.JSONDecodeError as e:
                cut = e.pos >= len(self.buf) - 1 or e.msg.startswith("Unterminated string")
                if cut:  # a large value: read on in larger steps, never far past MAX_ENTRY or MAX_CONTAINERS
                    held = len(self.buf) - self.i
                    if held > MAX_ENTRY:
                        return self.skip(f"larger than {MAX_ENTRY >> 20} MiB")
                    weight = 4 * self.buf.count("{", self.i) + self.buf.count("[", self.i)  # an object: 4 arrays
                    if weight > MAX_CONTAINERS:
                        return self.skip(f"more than {MAX_CONTAINERS:,} arrays (an object counting as 4)")
                    room = min(MAX_ENTRY + 1 - held, 2 * (MAX_CONTAINERS - weight))  # a container takes 2 chars
                    self.want = max(CHUNK, min(self.want * 2, 64 * CHUNK, room))
                    if self.more():
                        continue
                raise self.error(e.msg, e.pos) from e
            except RecursionError:
                return self.skip("nested deeper than the JSON parser allows")
            except ValueError as e:  # valid JSON the parser refuses (an integer of over 4,300 digits)
                return self.skip(f"not parsed ({str(e)[:80]})")
            cut_number = end >= len(self.buf) and not self.eof and isinstance(doc, (int, float))
            if cut_number and self.more():  # a number cut at the end of what was read: read on
                continue
            self.size = end - self.i
            self.i = end
            if self.want > CHUNK:  # a large value: its text is not kept beside it
                self.drop()
            self.want = CHUNK
            return doc

    def skip(self, why: str) -> Unreadable:
        """Past the value at the cursor without parsing it: brackets and strings are matched by scanning, and the
        text scanned is dropped as the scan goes on, so memory holds about one chunk whatever the value."""
        self.want = CHUNK
        depth, in_string = 0, False
        while True:
            if depth > 0 and not in_string:  # text and flat arrays or objects: passed in one step
                self.i = _FLAT.match(self.buf, self.i).end()  # type: ignore[union-attr]
            m = (_IN_STRING if in_string else _OUTSIDE).search(self.buf, self.i)
            if m is None:
                self.i = len(self.buf)
                if not self.more():
                    raise self.error("Unterminated value")
                continue
            c = m.group()
            if in_string:
                if c == "\\":
                    if m.end() >= len(self.buf):  # the escaped character is in the text still to come
                        self.i = m.start()
                        if not self.more():
                            raise self.error("Unterminated string")
                        continue
                    self.i = m.end() + 1
                    continue
                in_string = False
            elif c == '"':
                in_string = True
            elif c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            elif depth == 0:  # a bare number or literal: to its end, however many chunks it spans
                self.i = m.end()
                while self.i >= len(self.buf) and self.more():
                    self.i = _BARE.match(self.buf, self.i).end()  # type: ignore[union-attr]
                return Unreadable(why)
            self.i = m.end()
            if depth <= 0 and not in_string:
                return Unreadable(why)

    def error(self, msg: str, at: int | None = None) -> HarError:
        at = self.i if at is None else at
        line = self.line + self.buf.count("\n", 0, at)
        last = self.buf.rfind("\n", 0, at)
        column = at - last if last >= 0 else at - self.line_start + 1
        return HarError(f"line {line} column {column}", f"invalid JSON ({msg})")


def entries(path: Path, pos: HarPosition | None = None) -> Iterator[dict[str, Any]]:
    """The entries of `log.entries`, in order; HarError where the file stops being a readable HAR."""
    pos = pos if pos is not None else HarPosition()
    with open_regular(path) as f:
        t = _Text(f, pos)
        t.expect("{")
        found = False
        for key in _keys(t):
            if key != "log":
                t.value()
                continue
            t.expect("{")
            for log_key in _keys(t):
                if log_key != "entries":
                    t.value()
                    continue
                found = True
                if t.peek() != "[":
                    raise HarError("log.entries", "not a list")
                t.expect("[")
                pos.started = True
                if t.peek() == "]":
                    t.i += 1
                    continue
                while True:
                    entry = t.value()
                    pos.entries += 1
                    pos.size = t.size
                    yield entry
                    if t.peek() == "]":
                        t.i += 1
                        break
                    t.expect(",")
        if not found:
            raise HarError("log.entries", "missing")


def _keys(t: _Text) -> Iterator[str]:
    """The keys of the object whose '{' was just read; the caller reads each value."""
    if t.peek() == "}":
        t.i += 1
        return
    while True:
        if t.peek() != '"':
            raise t.error("Expecting property name enclosed in double quotes")
        key = t.value()
        t.expect(":")
        yield key
        if t.peek() == "}":
            t.i += 1
            return
        t.expect(",")


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
LARGE = 1 << 20  # characters of an entry above which its id is hashed piece by piece (slower, no copies)


def entry_id(entry: Any, size: int = 0) -> str:
    """A stable id for a HAR entry, from its content: the same entry ingested twice has the same exchange id.
    An entry of `size` > LARGE characters is hashed as it is serialised, not serialised whole first."""
    h = hashlib.blake2b(digest_size=16)
    if size > LARGE:
        for piece in _ENCODER.iterencode(entry):
            h.update(piece.encode("utf-8", "surrogatepass"))
    else:
        h.update(json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    return str(uuid.UUID(bytes=h.digest(), version=4))


def _number(value: Any, what: str, anomalies: list[str]) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or abs(number) > _MAX_TS * 1000:
        anomalies.append(f"har_timing_unrepresentable:{what}")
        return None
    return number


_PLACEHOLDER = "http://url.invalid/"


def exchange(entry: Any, max_body: int = DEFAULT_MAX_BODY, size: int = 0) -> HttpExchange:
    """One HAR entry as an exchange; raises (ValueError, KeyError, TypeError, ...) for an entry that is not one."""
    if not isinstance(entry, dict):
        raise TypeError(f"a {type(entry).__name__}, not an entry")
    anomalies: list[str] = []
    timings: dict[str, Any] = entry["timings"] if isinstance(entry.get("timings"), dict) else {}
    total = _number(entry.get("time") or 0, "time", anomalies)
    waits = [_number(timings.get(k), k, anomalies) for k in ("blocked", "dns", "connect", "send", "wait")]
    for side in ("request", "response"):
        headers = entry[side].get("headers") if isinstance(entry.get(side), dict) else None
        if isinstance(headers, list) and len(headers) > MAX_HEADERS:
            raise ValueError(f"{side}.headers holds more than {MAX_HEADERS} fields")
    fid = entry_id(entry, size)
    entry, request_big, response_big = _without_large_bodies(entry, max_body)
    url = entry["request"].get("url") if isinstance(entry.get("request"), dict) else None
    try:
        flow = har.request_to_flow({**entry, "time": total or 0.0})
    except ValueError:
        # mitmproxy refuses URLs the recorder keeps live (`http://[::1/`, a port past 65535, `h＃x`): the entry
        # is read with a placeholder, and the exchange carries the URL as written (flagged url_malformed by
        # extraction); an entry that fails for any other reason fails again, and is named
        if not isinstance(url, str):
            raise
        flow = har.request_to_flow(
            {**entry, "request": {**entry["request"], "url": _PLACEHOLDER}, "time": total or 0.0}
        )
    else:
        url = None
    flow.id = fid
    _http_versions(flow, entry, anomalies)
    _times(flow, entry, total, waits, anomalies)
    ex = exchange_from_flow(flow, max_body=max_body, source="ingest", extra_anomalies=anomalies)
    if url is not None:
        ex.url = url
    if request_big is not None:
        ex.request_body, ex.request_prefix, ex.bytes_in = None, request_big[1], request_big[0]
        ex.anomalies.append(f"request_body_too_large:{request_big[0]}")
    if response_big is not None and flow.response is not None:
        ex.response_body, ex.bytes_out = None, response_big[0]
        ex.anomalies.append(f"response_body_too_large:{response_big[0]}")
    return ex


# how HAR writers spell HTTP versions (Chrome `http/2.0` and `h3`, Firefox `HTTP/2`, others `HTTP/2.0`, `h2`):
# mitmproxy's importer knows three spellings and takes any other, HTTP/1.0 included, for HTTP/1.1. Each is stored
# as mitmproxy's proxy itself names it (`HTTP/2.0`, `HTTP/3`), so that live, flow-file and HAR rows agree
_VERSIONS = {
    **dict.fromkeys(("http/1.0", "1.0"), "HTTP/1.0"),
    **dict.fromkeys(("http/1.1", "1.1"), "HTTP/1.1"),
    **dict.fromkeys(("http/2", "http/2.0", "h2", "h2c", "2", "2.0"), "HTTP/2.0"),
    **dict.fromkeys(("http/3", "http/3.0", "h3", "3", "3.0"), "HTTP/3"),
}


def _http_versions(flow: http.HTTPFlow, entry: dict[str, Any], anomalies: list[str]) -> None:
    """The request's and response's HTTP versions as the entry states them; one no spelling names keeps mitmproxy's
    reading and is noted (`har_http_version:<as written>`)."""
    for side, message in (("request", flow.request), ("response", flow.response)):
        stated = entry[side].get("httpVersion") if isinstance(entry.get(side), dict) else None
        if message is None or not isinstance(stated, str) or not stated:
            continue
        version = _VERSIONS.get(stated.strip().lower())
        if version is None:
            anomalies.append(f"har_http_version:{clip(stated)}")
        else:
            message.http_version = version


def _without_large_bodies(
    entry: dict[str, Any], max_body: int
) -> tuple[dict[str, Any], tuple[int, bytes] | None, tuple[int, bytes] | None]:
    """The entry with each body text larger than `max_body` emptied, and for each such body (bytes, first bytes):
    a body that is not parsed is not converted either (mitmproxy's importer would copy it several times over,
    and re-compress it for its Content-Encoding), so an entry costs about twice its size in memory, not five."""
    found: list[tuple[int, bytes] | None] = []
    for side, key in (("request", "postData"), ("response", "content")):
        holder: Any = entry.get(side)
        body: Any = holder.get(key) if isinstance(holder, dict) else None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or len(text) <= max_body // 2:
            found.append(None)
            continue
        if body.get("encoding") == "base64":
            size = len(text) // 4 * 3 - text[-2:].count("=")
            head = base64.b64decode(text[: PREFIX // 3 * 4], validate=False)
        else:
            size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))
            head = text[:PREFIX].encode("utf-8", "surrogateescape")[:PREFIX]
        if size <= max_body:
            found.append(None)
            continue
        found.append((size, head))
        entry = {**entry, side: {**holder, key: {**body, "text": ""}}}
    return entry, found[0], found[1]


def _times(
    flow: http.HTTPFlow, entry: dict[str, Any], total: float | None, waits: list[float | None], anomalies: list[str]
) -> None:
    started = datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00"))
    if started.tzinfo is None:  # HAR requires a zone; read as the machine's own, the same file gave other times
        started = started.replace(tzinfo=UTC)
        anomalies.append("har_time_without_zone")
    start = started.timestamp()
    before = sum(max(0.0, w or 0.0) for w in waits)
    flow.request.timestamp_start = start
    flow.request.timestamp_end = start
    if flow.response is not None:
        first = start + before / 1000.0
        end = start + total / 1000.0 if total is not None else None
        if abs(first) > _MAX_TS or (end is not None and abs(end) > _MAX_TS):
            anomalies.append("har_timing_unrepresentable:sum")
            first, end = start, None
        flow.response.timestamp_start = first
        flow.response.timestamp_end = end
