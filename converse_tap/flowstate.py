"""The one place where a flow file's record becomes trusted: the saved state of an HTTP flow checked against the
shape `exchange_from_state` reads, whatever the file says.

A flow file is a crafted or damaged input as much as a recording: any field may hold any tnetstring type. A
value the exchange cannot do without (the flow's id, its request, the request's method, scheme, host, port,
path, headers) makes the whole record unreadable: `BadRecord` names the field and what it holds, never its
content (a path or host may carry credentials). A value the exchange can do without (a timestamp, the status
code, a body, the HTTP version, the error, the peer addresses, trailers) becomes unknown, with the anomaly
`flow_field_invalid:<field>`, and the record is kept. Every check is a type test or a comparison: a few
microseconds per flow.
"""

from __future__ import annotations

import math
from typing import Any

MAX_TS = 253_402_300_799.0  # 9999-12-31T23:59:59Z: beyond it no timestamp column holds the value
INVALID = "flow_field_invalid"
MAX_HEADERS = 10_000  # header fields of one request or response


class BadRecord(ValueError):
    """A record whose state cannot become an exchange; the message names the field."""


def _what(value: Any) -> str:
    return "missing" if value is None else f"of type {type(value).__name__}"


def _text(value: Any, field: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise BadRecord(f"{field} is {_what(value)}, not text")


def _pairs(value: Any, field: str) -> list[tuple[bytes, bytes]]:
    """Header fields as (name, value) byte strings; BadRecord unless every entry is a pair of texts."""
    if not isinstance(value, (list, tuple)):
        raise BadRecord(f"{field} is {_what(value)}, not a list")
    if len(value) > MAX_HEADERS:
        raise BadRecord(f"{field} holds more than {MAX_HEADERS} fields")
    for item in value:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not bytes or type(item[1]) is not bytes:
            break
    else:
        return list(value)  # as the fast reader gives them
    out = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise BadRecord(f"{field} holds a value {_what(item)}, not a (name, value) pair")
        out.append((_text(item[0], field), _text(item[1], field)))
    return out


def _time(msg: dict[str, Any], key: str, field: str, anomalies: list[str]) -> None:
    value = msg.get(key)
    if value is None:
        return
    if (type(value) is float or type(value) is int) and math.isfinite(value) and -MAX_TS <= value <= MAX_TS:
        return
    msg[key] = None
    anomalies.append(f"{INVALID}:{field}.{key}")


def _content(msg: dict[str, Any], field: str, anomalies: list[str]) -> None:
    value = msg.get("content")
    if value is None or type(value) is bytes:
        size = msg.get("content_size")
        if size is not None and (type(size) is not int or size < 0):
            raise BadRecord(f"{field}.content_size is {_what(size)}")
        return
    msg["content"] = None
    msg.pop("content_size", None)
    anomalies.append(f"{INVALID}:{field}.content")


def _message(value: Any, field: str, anomalies: list[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRecord(f"{field} is {_what(value)}, not a dict")
    msg = value  # a state is the reader's own: checked in place
    msg["headers"] = _pairs(msg.get("headers"), f"{field}.headers")
    version = msg.get("http_version")
    if type(version) is not bytes:
        if isinstance(version, str):
            msg["http_version"] = version.encode("utf-8", "surrogateescape")
        else:
            msg["http_version"] = b""
            anomalies.append(f"{INVALID}:{field}.http_version")
    _time(msg, "timestamp_start", field, anomalies)
    _time(msg, "timestamp_end", field, anomalies)
    _content(msg, field, anomalies)
    return msg


def _address(conn: Any, keys: tuple[str, ...], field: str, anomalies: list[str]) -> dict[str, Any] | None:
    if conn is None:
        return None
    if not isinstance(conn, dict):
        anomalies.append(f"{INVALID}:{field}")
        return None
    out = {}
    for key in keys:
        value = conn.get(key)
        if value is None:
            continue
        if (
            isinstance(value, (list, tuple))
            and len(value) >= 2
            and isinstance(value[0], str)
            and type(value[1]) is int
            and 0 <= value[1] <= 65535
        ):
            out[key] = value
        else:
            anomalies.append(f"{INVALID}:{field}.{key}")
    return out


def checked(state: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """An HTTP flow's state (fast reader's or migrated) in the shape `exchange_from_state` reads, and the
    anomalies of the values that had to become unknown; BadRecord when it cannot be an exchange at all."""
    anomalies: list[str] = []
    fid = state.get("id")
    if not isinstance(fid, str) or not fid:
        raise BadRecord(f"the flow id is {_what(fid)}, not a string")
    req = _message(state.get("request"), "request", anomalies)
    for key in ("method", "scheme", "path"):
        req[key] = _text(req.get(key), f"request.{key}")
    host = req.get("host")
    if isinstance(host, bytes):
        req["host"] = host.decode("utf-8", "surrogateescape")
    elif not isinstance(host, str):
        raise BadRecord(f"request.host is {_what(host)}, not text")
    port = req.get("port")
    if type(port) is not int or not 0 <= port <= 65535:
        raise BadRecord(f"request.port is {'out of range' if type(port) is int else _what(port)}")
    out = {"type": "http", "id": fid, "request": req, "response": None}
    resp = state.get("response")
    if resp is not None:
        resp = out["response"] = _message(resp, "response", anomalies)
        status = resp.get("status_code")
        if type(status) is not int or not 0 <= status <= 999:
            resp["status_code"] = None
            anomalies.append(f"{INVALID}:response.status_code")
        trailers = resp.get("trailers")
        if trailers is not None:
            try:
                resp["trailers"] = _pairs(trailers, "response.trailers")
            except BadRecord:
                resp["trailers"] = None
                anomalies.append(f"{INVALID}:response.trailers")
    error = state.get("error")
    if error is not None:
        ok = isinstance(error, dict) and isinstance(error.get("msg"), str)
        if ok:
            _time(error, "timestamp", "error", anomalies)
        else:
            anomalies.append(f"{INVALID}:error")
        out["error"] = error if ok else None
    out["client_conn"] = _address(state.get("client_conn"), ("peername",), "client_conn", anomalies)
    out["server_conn"] = _address(state.get("server_conn"), ("address", "peername"), "server_conn", anomalies)
    return out, anomalies
