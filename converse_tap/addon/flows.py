"""mitmproxy HTTPFlow -> HttpExchange, shared by the live addon and offline ingest of flow files; and the same
from a flow's saved state (a `mitmdump -w` record), which ingest reads without building HTTPFlow objects."""

from __future__ import annotations

from typing import Any

from mitmproxy import http
from mitmproxy.net.http import url as urls

from ..a2a.classify import PREFIX
from ..a2a.exchange import HttpExchange
from ..a2a.grpc_frames import GrpcFrame
from ..a2a.headers import Headers
from ..a2a.inflate import TooLarge, Truncated, inflate
from ..a2a.sse import SseEvent

DEFAULT_MAX_BODY = 16 * 1024 * 1024


def _addr(address: Any) -> str | None:
    if not address:
        return None
    try:
        host, port = address[0], address[1]
    except (TypeError, IndexError):
        return str(address)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _body(raw: bytes | None, headers: Headers, max_body: int, what: str, anomalies: list[str]) -> bytes | None:
    """The content-decoded body, as mitmproxy's `Message.get_content(strict=True)` gives it but never larger than
    `max_body` once decoded; None (and an anomaly) when it is too large or its Content-Encoding does not decode."""
    if raw is None:
        return None
    if len(raw) > max_body:
        anomalies.append(f"{what}_body_too_large:{len(raw)}")
        return None
    ce = ", ".join(headers.get_all("content-encoding"))  # folded, as mitmproxy's Headers.get does
    if not ce:
        return raw
    try:
        return inflate(raw, ce, max_body)
    except TooLarge:
        anomalies.append(f"{what}_body_too_large_decoded:{max_body}")
    except Truncated as e:  # (a stream the client left, captured as far as it went): what it holds is kept
        anomalies.append(f"{what}_content_encoding_cut:{ce[:100]}")
        return e.partial
    except ValueError:
        anomalies.append(f"{what}_content_encoding_invalid:{ce[:100]}")
    return None


def _prefix(raw: bytes | None, max_body: int) -> bytes | None:
    return raw[:PREFIX] if raw and len(raw) > max_body else None


def exchange_from_flow(
    flow: http.HTTPFlow,
    sse_events: list[SseEvent] | None = None,
    sse_comments: int = 0,
    streamed_bytes: int | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    source: str = "live",
    extra_anomalies: list[str] | None = None,
    grpc_frames: list[GrpcFrame] | None = None,
) -> HttpExchange:
    anomalies: list[str] = list(extra_anomalies or ())
    req = flow.request
    resp = flow.response
    request_headers = Headers(req.headers.items(multi=True))
    ex = HttpExchange(
        id=flow.id,
        method=req.method,
        url=req.url,
        request_headers=request_headers,
        request_body=_body(req.raw_content, request_headers, max_body, "request", anomalies),
        request_prefix=_prefix(req.raw_content, max_body),
        http_version=req.http_version,
        ts_start=req.timestamp_start,
        client_addr=_addr(flow.client_conn.peername),
        server_addr=_addr(flow.server_conn.address or flow.server_conn.peername),
        error=flow.error.msg if flow.error else None,
        bytes_in=len(req.raw_content) if req.raw_content is not None else None,
        source=source,
        anomalies=anomalies,
    )
    if resp is not None:
        ex.status = resp.status_code
        ex.response_headers = response_headers = Headers(resp.headers.items(multi=True))
        ex.ts_first_byte = resp.timestamp_start
        ex.ts_end = resp.timestamp_end
        if resp.trailers:
            ex.response_trailers = Headers(resp.trailers.items(multi=True))
        if sse_events is not None or grpc_frames is not None:
            ex.sse_events = sse_events
            ex.sse_comments = sse_comments
            ex.grpc_frames = grpc_frames
            ex.bytes_out = streamed_bytes
        else:
            ex.response_body = _body(resp.raw_content, response_headers, max_body, "response", anomalies)
            ex.bytes_out = len(resp.raw_content) if resp.raw_content is not None else streamed_bytes
    if ex.ts_end is None and flow.error is not None:
        ex.ts_end = flow.error.timestamp
    return ex


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def _headers(fields: Any) -> Headers:
    return Headers((_text(k), _text(v)) for k, v in fields)


def _saved_body(
    msg: dict[str, Any], headers: Headers, max_body: int, what: str, anomalies: list[str]
) -> tuple[bytes | None, bytes | None, int | None]:
    """(decoded body, prefix of an oversize body, bytes on the wire) of a saved request or response. A reader
    that skipped an oversize body gives its first bytes as `content` and its length as `content_size`; a body
    mitmproxy did not store (streamed without `store_streamed_bodies`) is None, and said so."""
    raw = msg.get("content")
    size = msg.get("content_size")
    if size is not None:
        anomalies.append(f"{what}_body_too_large:{size}")
        return None, raw[:PREFIX] if raw else None, size
    if raw is None:
        anomalies.append(f"{what}_body_not_stored")
        return None, None, None
    return _body(raw, headers, max_body, what, anomalies), _prefix(raw, max_body), len(raw)


def exchange_from_state(
    state: dict[str, Any], max_body: int = DEFAULT_MAX_BODY, source: str = "ingest"
) -> HttpExchange:
    """`exchange_from_flow(HTTPFlow.from_state(state))` without building the flow: the same fields read straight
    from an HTTP flow's saved state (already migrated to this mitmproxy's version by `io.compat.migrate_flow`),
    and an anomaly for a body the capture does not hold (`{request,response}_body_not_stored`)."""
    anomalies: list[str] = []
    req, resp, error = state["request"], state.get("response"), state.get("error")
    method = _text(req["method"]).upper()
    if method == "CONNECT":
        url = f"{req['host']}:{req['port']}"
    else:
        path = _text(req["path"])
        url = urls.unparse(_text(req["scheme"]), req["host"], req["port"], path if path != "*" else "")
    request_headers = _headers(req["headers"])
    body, prefix, size = _saved_body(req, request_headers, max_body, "request", anomalies)
    server = state.get("server_conn") or {}
    ex = HttpExchange(
        id=state["id"],
        method=method,
        url=url,
        request_headers=request_headers,
        request_body=body,
        request_prefix=prefix,
        http_version=_text(req["http_version"]),
        ts_start=req.get("timestamp_start"),
        client_addr=_addr((state.get("client_conn") or {}).get("peername")),
        server_addr=_addr(server.get("address") or server.get("peername")),
        error=error["msg"] if error else None,
        bytes_in=size,
        source=source,
        anomalies=anomalies,
    )
    if resp is not None:
        ex.status = resp["status_code"]
        ex.response_headers = response_headers = _headers(resp["headers"])
        ex.ts_first_byte = resp.get("timestamp_start")
        ex.ts_end = resp.get("timestamp_end")
        if resp.get("trailers"):
            ex.response_trailers = _headers(resp["trailers"])
        ex.response_body, _, ex.bytes_out = _saved_body(resp, response_headers, max_body, "response", anomalies)
    if ex.ts_end is None and error:
        ex.ts_end = error.get("timestamp")
    return ex
