"""A HAR entry made readable by mitmproxy's importer (`mitmproxy.io.har.request_to_flow`), which indexes the
fields the HAR format requires and raises on any of them missing or of another type. Exporters write what they
please: a `null` response for a request that never got one, `null` headers, a header value that is a number, a
form's `params` without its `text`, a start time that is not ISO 8601. Each such field is filled in with what
stands for "unknown" and noted on the exchange, so that one odd field costs that field, never the exchange; only
an entry without a request method or URL, which is no exchange at all, is still refused. What exporters write for
"none" is read as none, not as an empty value: a response of status 0 or -1 with neither headers nor body (a request
that got no reply), a body left out or null where the entry says it had bytes (one the exporter did not keep)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from .a2a.envelope import clip

_EPOCH = "1970-01-01T00:00:00+00:00"  # stands for an unreadable start time (the exchange's times are then unknown)
_NO_RESPONSE = {"status": 0, "httpVersion": "", "headers": [], "content": {}}
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BASE64_LOOK = 1 << 16  # characters of a text said to be base64 that are looked at (a text one fails at once)


@dataclass
class Fitted:
    entry: dict[str, Any]
    started: bool = True  # the entry's start time was read
    responded: bool = True  # the entry has a response
    request_stored: bool = True  # False: the request had a body the exporter did not keep
    response_stored: bool = True  # False: so had the response


def fitted(entry: dict[str, Any], anomalies: list[str]) -> Fitted:
    """`entry` with every field the importer indexes present and of its type, each one replaced noted
    (`har_<where>_unreadable`, `har_response_missing`); ValueError for an entry without a request method or URL."""
    request = entry.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        raise ValueError("request.method missing")
    if not isinstance(request.get("url"), str):
        raise ValueError("request.url missing")
    fit = Fitted(dict(entry))
    cached = _cache_hit(entry)
    if cached is not None:
        anomalies.append(f"har_from_cache:{clip(cached)}")
    worker = _service_worker(entry.get("response"))
    if worker is not None:
        anomalies.append(f"har_via_service_worker:{clip(worker)}")
    started = started_at(entry.get("startedDateTime"))
    if started is None:
        anomalies.append("har_started_unreadable")
        fit.entry["startedDateTime"], fit.started = _EPOCH, False
    elif entry["startedDateTime"].endswith("z"):  # RFC 3339's UTC, which the importer refuses: as it reads it
        fit.entry["startedDateTime"] = started.isoformat()
    response = entry.get("response")
    if not isinstance(response, dict):
        anomalies.append("har_response_missing")
        response, fit.responded = _NO_RESPONSE, False
    elif _no_reply(response):
        response, fit.responded = {**response, "status": 0}, False
    fit.entry["request"] = _side(request, "request", anomalies)
    fit.entry["response"] = _side(response, "response", anomalies)
    fit.request_stored = _request_stored(request, anomalies)
    fit.response_stored = not fit.responded or _response_stored(fit.entry["response"], anomalies)
    return fit


def _cache_hit(entry: dict[str, Any]) -> str | None:
    """Which cache answered the request, when the browser says one did (Chrome's `_fromCache`: "memory", "disk";
    Safari's `_fetchType`: "Memory Cache", "Disk Cache"): the request never reached the server, so no proxy saw
    it. The exchange is kept, and noted `har_from_cache:<cache>`, so that it can be told from a call on the wire."""
    chrome, safari = entry.get("_fromCache"), entry.get("_fetchType")
    if isinstance(chrome, str) and chrome.strip():
        return chrome.strip()
    if isinstance(safari, str) and safari.strip().lower().endswith("cache"):
        return safari.strip().lower().removesuffix("cache").strip() or safari.strip()
    return None


def _service_worker(response: Any) -> str | None:
    """Where a service worker took the reply it answered the page with, when Chrome says one did (the response's
    `_fetchedViaServiceWorker`, and its `_serviceWorkerResponseSource`: "network", "cache-storage", "http-cache",
    "fallback-code"; "unknown" when unsaid): the page's request is not the one on the wire (the worker's own
    fetch, if it made one, is an entry of its own), so it is noted `har_via_service_worker:<source>`."""
    if not isinstance(response, dict) or response.get("_fetchedViaServiceWorker") is not True:
        return None
    source = response.get("_serviceWorkerResponseSource")
    return source.strip() if isinstance(source, str) and source.strip() else "unknown"


def _no_reply(response: dict[str, Any]) -> bool:
    """Whether a response is how exporters write that none came: status 0 (Chrome, Firefox, mitmproxy's export,
    with the reason in `_error`) or -1 (Playwright, with `_failureText`), and neither a header nor a body."""
    status, headers, content = response.get("status"), response.get("headers"), response.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return status in (0, -1) and not isinstance(status, bool) and not headers and not text


def _request_stored(written: dict[str, Any], anomalies: list[str]) -> bool:
    """Whether the request's body is in the entry: not when its `postData.text` is null and it has no form
    `params` (mitmproxy's export of a body it did not keep), nor when it states a `bodySize` above 0 and holds
    neither text nor params (exporters leave out bodies they did not keep)."""
    body, size = written.get("postData"), written.get("bodySize")
    if isinstance(body, dict):
        text, params = body.get("text"), body.get("params")
        if text is not None or (isinstance(params, list) and params) or ("text" not in body and not _positive(size)):
            return True
    elif body is not None or not _positive(size):
        return True
    anomalies.append("request_body_not_stored")
    return False


def _response_stored(fitted: dict[str, Any], anomalies: list[str]) -> bool:
    """Whether the reply's body is in the entry: not when it has no text (absent or null), nor is kept as a file
    (`_file`), for a body the entry says had bytes (`content.size` or `bodySize` above 0): Chrome keeps no
    EventSource stream, and exporters may leave out any body."""
    content = fitted["content"]
    if isinstance(content.get("text"), str) or "_file" in content:
        return True
    if not _positive(content.get("size")) and not _positive(fitted.get("bodySize")):
        return True
    anomalies.append("response_body_not_stored")
    return False


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def started_at(value: Any) -> datetime | None:
    """A start time as ISO 8601 writes it (RFC 3339 also allows a lower-case `z` for UTC, which Python's reader
    and mitmproxy's importer refused); None for one that is not."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value[:-1] + "Z" if value.endswith("z") else value)
    except ValueError:
        return None


def _side(holder: dict[str, Any], side: str, anomalies: list[str]) -> dict[str, Any]:
    holder = dict(holder)
    fields = holder.get("headers")
    if fields is None or not isinstance(fields, list):
        if fields is not None or "headers" in holder:
            anomalies.append(f"har_{side}_headers_unreadable")
        holder["headers"] = []
    else:
        kept = [f for f in map(_field, fields) if f is not None]
        if len(kept) != len(fields):
            anomalies.append(f"har_{side}_header_unreadable:{len(fields) - len(kept)}")
        holder["headers"] = kept
    if not isinstance(holder.get("httpVersion"), str):
        holder["httpVersion"] = ""
    if side == "request":
        _request_body(holder, anomalies)
    else:
        _response_body(holder, anomalies)
    return holder


def _field(field: Any) -> Any:
    """A header field in the notation it was written in (`{name, value}`, or `[name, value]` as Slack writes them),
    a number as its value taken as its text; None for one without a name and value of text."""
    if isinstance(field, dict):
        name, value = field.get("name"), field.get("value")
    elif isinstance(field, list | tuple) and len(field) >= 2:
        name, value = field[0], field[1]
    else:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(name, str) or not isinstance(value, str):
        return None
    if isinstance(field, dict):
        return field if value is field.get("value") else {**field, "value": value}
    return [name, value]


def _request_body(holder: dict[str, Any], anomalies: list[str]) -> None:
    """postData as the importer reads it: `text` (a form written only as `params` becomes its urlencoded text)."""
    if "postData" not in holder:
        return
    body = holder["postData"]
    if not isinstance(body, dict):
        anomalies.append("har_request_body_unreadable")
        del holder["postData"]
        return
    text = body.get("text")
    if isinstance(text, str):
        return
    params = body.get("params")
    if text is None and isinstance(params, list):
        pairs = [(p.get("name"), p.get("value", "")) for p in params if isinstance(p, dict)]
        text = urlencode([(n, v) for n, v in pairs if isinstance(n, str) and isinstance(v, str)])
    else:
        if text is not None:
            anomalies.append("har_request_body_unreadable")
        text = ""
    holder["postData"] = {**body, "text": text}


def _response_body(holder: dict[str, Any], anomalies: list[str]) -> None:
    status = holder.get("status")
    if isinstance(status, str) and status.strip().isdigit():
        status = int(status)
    if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 999:
        anomalies.append(f"har_response_status_unreadable:{clip(str(holder.get('status')))}")
        status = 0
    holder["status"] = status
    content = holder.get("content")
    if not isinstance(content, dict):
        if content is not None or "content" in holder:
            anomalies.append("har_response_content_unreadable")
        holder["content"] = {}
        return
    text, encoding = content.get("text"), content.get("encoding")
    if "text" in content and text is None:  # a `null` text is no body (the importer would decode None)
        holder["content"] = content = _without(content, "text")
    if (text is not None and not isinstance(text, str)) or (encoding is not None and not isinstance(encoding, str)):
        anomalies.append("har_response_content_unreadable")
        holder["content"] = _without(content, "text", "encoding")
    elif encoding is not None and encoding.strip().lower() != "base64":
        # HAR knows one encoding of `text`, base64; the importer hands any other name to Python's codecs (`zip`,
        # `rot13`, `hex`...), a name from the file choosing a transformation: the text is read as text
        anomalies.append(f"har_response_encoding_ignored:{clip(encoding)}")
        holder["content"] = _without(content, "encoding")
    elif encoding is not None and text and not _is_base64(text):
        # the importer would decode it leniently (every character outside the alphabet dropped: garbage), or fail
        anomalies.append("har_response_not_base64")
        holder["content"] = _without(content, "encoding")
    elif encoding is not None:
        holder["content"] = {**content, "encoding": "base64"}  # (`BASE64`, ` base64`: the importer's spelling)


def base64_request(entry: dict[str, Any], anomalies: list[str]) -> dict[str, Any]:
    """The entry with a request body marked `"encoding": "base64"` given to the importer as the bytes it encodes.
    HAR names no encoding for `postData`, but exporters write a binary request body so, as `content` holds a
    binary reply (and a body past the parse limit was already read so: `harentry`); the importer took the base64
    text for the body. A text that is not base64 is read as the text it is (`har_request_not_base64`), any other
    encoding name ignored (`har_request_encoding_ignored:<name>`)."""
    request = entry["request"]
    body = request.get("postData")
    if not isinstance(body, dict) or body.get("encoding") is None:
        return entry
    text, encoding = body.get("text"), body["encoding"]
    if not isinstance(text, str) or not text:
        return entry
    if not isinstance(encoding, str) or encoding.strip().lower() != "base64":
        anomalies.append(f"har_request_encoding_ignored:{clip(str(encoding))}")
        return entry
    if not _is_base64(text):
        anomalies.append("har_request_not_base64")
        return entry
    return {**entry, "request": {**request, "postData": {**body, "text": base64.b64decode(text)}}}


def _without(content: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in content.items() if k not in keys}


def _is_base64(text: str) -> bool:
    """Whether `text` is base64 the importer decodes: its alphabet (a look at its start: text fails at once), and
    decoding as the importer does (`base64.b64decode`, which refuses bad padding) succeeds."""
    if not _BASE64.fullmatch(text, 0, _BASE64_LOOK):
        return False
    try:
        base64.b64decode(text)
    except ValueError:  # binascii.Error
        return False
    return True


def whole_chars(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` with each half of a surrogate pair that stands alone in its request or response (`\\ud83d` without
    its other half: a text an exporter cut inside a character, which no bytes can stand for, and which mitmproxy's
    importer refused the entry for) replaced by U+FFFD; `entry` itself when it holds none."""
    sides: dict[str, Any] = {side: _whole(entry[side]) for side in ("request", "response") if side in entry}
    if all(sides[side] is entry[side] for side in sides):
        return entry
    return {**entry, **sides}


def _whole(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        items = {k: _whole(v) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if isinstance(value, list):
        kept = [_whole(v) for v in value]
        return value if all(a is b for a, b in zip(kept, value, strict=True)) else kept
    return value
