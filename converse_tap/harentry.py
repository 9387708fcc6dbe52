"""One HAR entry as an exchange, through mitmproxy's own HAR importer (`mitmproxy.io.har.request_to_flow`), with
timings taken from the entry; a timing that cannot be represented (not a number, infinite, out of any clock's
range) becomes unknown with an anomaly instead of costing the entry. An entry's exchange id is derived from its
content, so the same HAR ingested twice is recognised.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import uuid
from datetime import UTC
from typing import Any

from mitmproxy import http
from mitmproxy.io import har
from mitmproxy.net.http.headers import parse_content_type

from .a2a import urls
from .a2a.envelope import clip
from .a2a.exchange import HttpExchange
from .a2a.headers import Headers
from .a2a.inflate import Truncated, inflate
from .addon.flows import DEFAULT_MAX_BODY, PREFIX, exchange_from_flow
from .har_attach import Attachments, attached_bodies
from .har_wire import server_address, unstored, wire_size
from .harfit import base64_request, fitted, started_at, whole_chars

MAX_HEADERS = 10_000  # header fields of a request or response
_MAX_TS = 253_402_300_799.0  # 9999-12-31T23:59:59Z


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
LARGE = 1 << 20  # characters of an entry above which its id is hashed piece by piece (slower, no copies)


# what an entry says of the export that holds it, or of the connection, rather than of the call: two exports of
# one session state the same call with another `pageref` (pages are numbered per export), and mitmproxy's own
# export counts a connection's set-up (`timings.connect`, `ssl`, and so `time`) in the first entry of a server
# in that export only; `_`-prefixed keys are an exporter's own (Chrome's `_initiator`, `_priority`...). The
# call's own timings (sending, waiting, receiving) stay: two calls alike in all else still differ by them.
_OF_THE_EXPORT = frozenset({"pageref", "time", "cache"})
_OF_THE_CALL = ("send", "wait", "receive")


def _private(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_")


def identity(entry: Any) -> Any:
    """What of an entry says which call it was: the entry without what another export of the same call states
    differently (`_OF_THE_EXPORT`, the connection's timings, exporter-private keys of the entry and of its request
    and response)."""
    if not isinstance(entry, dict):
        return entry
    out = {k: v for k, v in entry.items() if k not in _OF_THE_EXPORT and not _private(k)}
    if isinstance(timings := out.get("timings"), dict):
        out["timings"] = {k: timings[k] for k in _OF_THE_CALL if k in timings}
    for side in ("request", "response"):
        part = out.get(side)
        if isinstance(part, dict) and any(_private(k) for k in part):
            out[side] = {k: v for k, v in part.items() if not _private(k)}
    return out


def entry_id(entry: Any, size: int = 0) -> str:
    """A stable id for a HAR entry, from what says which call it was (`identity`): the same call ingested twice,
    from one HAR or from two overlapping exports of a session, has the same exchange id. An entry of `size` >
    LARGE characters is hashed as it is serialised, not serialised whole first."""
    entry = identity(entry)
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


def exchange(
    entry: Any, max_body: int = DEFAULT_MAX_BODY, size: int = 0, attached: Attachments | None = None
) -> HttpExchange:
    """One HAR entry as an exchange; raises (ValueError, KeyError, TypeError, ...) for an entry that is not one.
    `attached`: where bodies the HAR keeps as files (`_file`) are read from."""
    if not isinstance(entry, dict):
        raise TypeError(f"a {type(entry).__name__}, not an entry")
    try:
        return _exchange(entry, max_body, size, attached, entry, [])
    except UnicodeEncodeError:  # (mitmproxy's importer encodes headers, URL and bodies: only then looked for)
        whole = whole_chars(entry)
        if whole is entry:
            raise
        return _exchange(whole, max_body, size, attached, entry, ["har_unpaired_surrogate"])


def _exchange(
    entry: dict[str, Any],
    max_body: int,
    size: int,
    attached: Attachments | None,
    stated: dict[str, Any],
    anomalies: list[str],
) -> HttpExchange:
    """`entry` as an exchange, its id that of the entry as `stated` in the file."""
    timings: dict[str, Any] = entry["timings"] if isinstance(entry.get("timings"), dict) else {}
    total = _number(entry.get("time"), "time", anomalies)  # not stated: the duration is unknown, not 0
    if total is not None and total < 0:  # -1: HAR's "not known"; any other, a duration no clock measured
        anomalies.extend(["har_timing_unrepresentable:time"] if total != -1 else [])
        total = None
    waits = [_number(timings.get(k), k, anomalies) for k in ("blocked", "dns", "connect", "send", "wait")]
    for side in ("request", "response"):
        headers = entry[side].get("headers") if isinstance(entry.get(side), dict) else None
        if isinstance(headers, list) and len(headers) > MAX_HEADERS:
            raise ValueError(f"{side}.headers holds more than {MAX_HEADERS} fields")
    fid = entry_id(stated, size)
    fit = fitted(entry, anomalies)
    entry, big = attached_bodies(fit.entry, attached, max_body, anomalies)
    entry, request_big, response_big = _without_large_bodies(entry, max_body)
    entry = base64_request(entry, anomalies)
    request_big, response_big = request_big or big.get("request"), response_big or big.get("response")
    entry, codings, encoded = _codings_apart(entry, anomalies)
    url = stated_url = entry["request"].get("url")
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
        _default_port(flow, url)
        url = None
    flow.id = fid
    if not fit.responded:
        flow.response = None
    unkept = unstored(flow, fit)
    _http_versions(flow, entry, anomalies)
    if fit.started:
        _times(flow, entry, total, waits, anomalies)
    else:  # no time stated: none is made up
        flow.request.timestamp_start = flow.request.timestamp_end = None  # type: ignore[assignment]
        if flow.response is not None:
            flow.response.timestamp_start = flow.response.timestamp_end = None  # type: ignore[assignment]
    ex = exchange_from_flow(flow, max_body=max_body, source="ingest", extra_anomalies=anomalies)
    if url is not None:
        ex.url = url
    ex.client_addr, ex.server_addr = None, server_address(entry, stated_url)
    if not entry["request"]["httpVersion"].strip():  # none stated (the importer's HTTP/1.1 is made up)
        ex.http_version = None
    if not fit.response_stored:
        ex.bytes_out = unkept
    if flow.response is None and ex.ts_start is not None and total is not None:  # when it failed, as a flow's error
        ex.ts_end = ex.ts_start + total / 1000.0 if abs(ex.ts_start + total / 1000.0) <= _MAX_TS else None
    for key in ("_error", "_failureText"):  # the reason a request got no response (Chrome's, Playwright's)
        failure = entry["response"].get(key)
        if isinstance(failure, str) and failure and ex.error is None:
            ex.error = clip(failure)
    if request_big is not None:
        ex.request_body, ex.request_prefix, ex.bytes_in = None, request_big[1], request_big[0]
        ex.anomalies.append(f"request_body_too_large:{request_big[0]}")
    if response_big is not None and flow.response is not None:
        ex.response_body, ex.bytes_out = None, response_big[0]
        ex.anomalies.append(f"response_body_too_large:{response_big[0]}")
    for side, fields in codings.items():  # the bodies are the decoded ones the HAR holds; the headers as it states
        setattr(ex, f"{side}_headers", Headers(har.fix_headers(fields).items(multi=True)))
        wire = wire_size(entry[side]) if side in encoded else None
        if wire is not None and (side == "request" or flow.response is not None):
            setattr(ex, "bytes_in" if side == "request" else "bytes_out", wire)
    _decode_still_encoded(ex, max_body)
    return ex


def _header_name(field: Any) -> str:
    """A HAR header field's name, lower-cased, in either notation mitmproxy's importer reads (`{"name", "value"}`,
    or `[name, value]` as Slack writes them)."""
    if isinstance(field, dict):
        return str(field.get("name", "")).lower()
    if isinstance(field, list | tuple) and field:
        return str(field[0]).lower()
    return ""


def _codings_apart(
    entry: dict[str, Any], anomalies: list[str]
) -> tuple[dict[str, Any], dict[str, list[Any]], set[str]]:
    """The entry as the importer is given it, each side's header list as written (for a side whose list changed),
    and the sides that had a Content-Encoding. A HAR holds bodies decoded; mitmproxy's importer encodes them again
    for their Content-Encoding, for extraction to decode once more, and refuses the whole entry for a coding it
    cannot apply (`br, gzip`, `aes128gcm`, a misspelling): the bodies are taken as the HAR holds them instead. It
    also turns each body's text into bytes by the Content-Type's charset, handed to Python's codecs, so that
    `charset=zip` (or `hex`, `rot13`, `gzip`) lost the entry: a charset that is no text encoding is given to it as
    UTF-8, noted `har_<side>_charset_unusable:<charset>`."""
    found: dict[str, list[Any]] = {}
    encoded: set[str] = set()
    for side in ("request", "response"):
        holder: Any = entry.get(side)
        fields = holder.get("headers") if isinstance(holder, dict) else None
        if not isinstance(fields, list):
            continue
        plain = [f for f in fields if _header_name(f) != "content-encoding"]
        if len(plain) != len(fields):
            encoded.add(side)
        kept = [_usable_charset(f, side, anomalies) for f in plain]
        if side in encoded or any(f is not g for f, g in zip(kept, plain, strict=True)):
            found[side] = fields
            entry = {**entry, side: {**holder, "headers": kept}}
    return entry, found, encoded


def _usable_charset(field: Any, side: str, anomalies: list[str]) -> Any:
    """A Content-Type field as the importer is given it: its charset, if it names no text encoding, as UTF-8."""
    if _header_name(field) != "content-type":
        return field
    value = field.get("value") if isinstance(field, dict) else field[1]
    parsed = parse_content_type(value) if isinstance(value, str) else None
    charset = parsed[2].get("charset") if parsed else None
    if charset is None:
        return field
    try:
        "".encode(charset.strip().strip("\"'"))
        return field
    except (LookupError, ValueError):
        anomalies.append(f"har_{side}_charset_unusable:{clip(charset)}")
    usable = f"{parsed[0]}/{parsed[1]}; charset=utf-8"  # type: ignore[index]
    return {**field, "value": usable} if isinstance(field, dict) else [field[0], usable]


def _encoded_start(body: bytes, coding: str) -> bool:
    """Whether `body` starts as data of `coding` does, which no text body can: gzip's and zstd's magic bytes, a
    zlib header; brotli has none, so a body that is not UTF-8 text."""
    if coding in ("gzip", "x-gzip"):
        return body.startswith(b"\x1f\x8b")
    if coding == "zstd":
        return body.startswith(b"\x28\xb5\x2f\xfd")
    if coding == "deflate":
        return len(body) > 1 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    if coding == "br":
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return False


def _decode_still_encoded(ex: HttpExchange, max_body: int) -> None:
    """A body the HAR holds still encoded (its text the base64 of the bytes on the wire, where HAR stores them
    decoded, as some exporters write it) decoded by its Content-Encoding, noted `har_<side>_body_still_encoded`;
    one that does not decode (or past `max_body`) is left as it is."""
    for side in ("request", "response"):
        body = ex.request_body if side == "request" else ex.response_body
        headers = ex.request_headers if side == "request" else ex.response_headers
        if not body or headers is None:
            continue
        ce = ", ".join(headers.get_all("content-encoding"))
        codings = [c.strip().lower() for c in ce.split(",") if c.strip()]
        if not codings or not _encoded_start(body, codings[-1]):
            continue
        try:
            plain = inflate(body, ce, max_body)
        except Truncated as e:  # cut short: what it holds is kept, and said
            plain = e.partial
            ex.anomalies.append(f"{side}_content_encoding_cut:{clip(ce)}")
        except ValueError:  # TooLarge included: kept as read
            continue
        if side == "request":
            ex.request_body = plain
        else:
            ex.response_body = plain
        ex.anomalies.append(f"har_{side}_body_still_encoded:{clip(ce)}")


# how HAR writers spell HTTP versions (Chrome `http/2.0` and `h3`, Firefox `HTTP/2`, others `HTTP/2.0`, `h2`):
# mitmproxy's importer knows three spellings and takes any other, HTTP/1.0 included, for HTTP/1.1. Each is stored
# as mitmproxy's proxy itself names it (`HTTP/2.0`, `HTTP/3`), so that live, flow-file and HAR rows agree
_VERSIONS = {
    **dict.fromkeys(("http/1.0", "1.0"), "HTTP/1.0"),
    **dict.fromkeys(("http/1.1", "1.1"), "HTTP/1.1"),
    **dict.fromkeys(("http/2", "http/2.0", "h2", "h2c", "2", "2.0"), "HTTP/2.0"),
    **dict.fromkeys(("http/3", "http/3.0", "h3", "3", "3.0"), "HTTP/3"),
}


def _default_port(flow: http.HTTPFlow, url: str | None) -> None:
    """A ws:// or wss:// URL without a port is on its scheme's default port (mitmproxy's importer gives every
    scheme but https port 80: `wss://agent.test/x` was read as `wss://agent.test:80/x`, another address)."""
    if flow.request.scheme in ("ws", "wss") and isinstance(url, str):
        port = urls.host_port(url.strip())[1]  # the port a client connects to: the scheme's default when unwritten
        if port is not None:
            flow.request.port = port


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
    started = started_at(entry["startedDateTime"])
    assert started is not None  # (`fitted` made an unreadable one the epoch)
    if started.tzinfo is None:  # HAR requires a zone; read as the machine's own, the same file gave other times
        started = started.replace(tzinfo=UTC)
        anomalies.append("har_time_without_zone")
    start = started.timestamp()
    before = sum(max(0.0, w or 0.0) for w in waits)
    flow.request.timestamp_start = start
    flow.request.timestamp_end = start
    if flow.response is not None:
        wait = waits[-1]  # no `wait` (no timings), or -1 (Playwright's "minimal" HAR): the first byte is unknown
        first = start + before / 1000.0 if wait is not None and wait >= 0 else None
        end = start + total / 1000.0 if total is not None else None
        if (first is not None and abs(first) > _MAX_TS) or (end is not None and abs(end) > _MAX_TS):
            anomalies.append("har_timing_unrepresentable:sum")
            first, end = start, None
        flow.response.timestamp_start = first  # type: ignore[assignment]
        flow.response.timestamp_end = end
