"""mitmproxy HTTPFlow -> HttpExchange, shared by the live addon and offline ingest of flow files."""

from __future__ import annotations

from typing import Any

from mitmproxy import http

from ..a2a.exchange import HttpExchange
from ..a2a.headers import Headers
from ..a2a.sse import SseEvent

DEFAULT_MAX_BODY = 16 * 1024 * 1024
PREFIX = 64 * 1024  # of an oversize request body, kept to recognise its JSON-RPC method


def _addr(address: Any) -> str | None:
    if not address:
        return None
    try:
        host, port = address[0], address[1]
    except (TypeError, IndexError):
        return str(address)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _body(message: http.Message, max_body: int, what: str, anomalies: list[str]) -> bytes | None:
    raw = message.raw_content
    if raw is None:
        return None
    if len(raw) > max_body:
        anomalies.append(f"{what}_body_too_large:{len(raw)}")
        return None
    try:
        return message.get_content(strict=True)
    except ValueError:
        anomalies.append(f"{what}_content_encoding_invalid:{message.headers.get('content-encoding', '')}")
        return None


def exchange_from_flow(
    flow: http.HTTPFlow,
    sse_events: list[SseEvent] | None = None,
    sse_comments: int = 0,
    streamed_bytes: int | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    source: str = "live",
    extra_anomalies: list[str] | None = None,
) -> HttpExchange:
    anomalies: list[str] = list(extra_anomalies or ())
    req = flow.request
    resp = flow.response
    ex = HttpExchange(
        id=flow.id,
        method=req.method,
        url=req.url,
        request_headers=Headers(req.headers.items(multi=True)),
        request_body=_body(req, max_body, "request", anomalies),
        request_prefix=req.raw_content[:PREFIX] if req.raw_content and len(req.raw_content) > max_body else None,
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
        ex.response_headers = Headers(resp.headers.items(multi=True))
        ex.ts_first_byte = resp.timestamp_start
        ex.ts_end = resp.timestamp_end
        if sse_events is not None:
            ex.sse_events = sse_events
            ex.sse_comments = sse_comments
            ex.bytes_out = streamed_bytes
        else:
            ex.response_body = _body(resp, max_body, "response", anomalies)
            ex.bytes_out = len(resp.raw_content) if resp.raw_content is not None else streamed_bytes
    if ex.ts_end is None and flow.error is not None:
        ex.ts_end = flow.error.timestamp
    return ex
