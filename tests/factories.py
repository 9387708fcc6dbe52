"""A2A test flows and payloads built on mitmproxy's own tflow helpers (fixed timestamps, keyword toggles)."""

from __future__ import annotations

import json
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow, tutils

EXT = "https://docs.radioso.ai/reference/a2a-converse-extension/v1"
BASE = "http://agent.test:9000"


def envelope(**fields: Any) -> dict[str, Any]:
    """A converse envelope; pass fields to override the answered-by-the-agent default."""
    env: dict[str, Any] = {
        "author": "agent",
        "answerCoverage": {
            "availability": "assessed",
            "coverage": "answered",
            "reason": "sufficient_evidence",
            "originatingTurnId": "turn-1",
            "originatingRequestId": "req-1",
        },
        "ownership": {"state": "ai_owned", "suppressed": False},
        "citations": [{"documentId": "doc-1", "chunkId": "c-1", "title": "Returns policy"}],
    }
    env.update(fields)
    return {k: v for k, v in env.items() if v is not None}


def agent_message(
    mid: str = "m-agent",
    text: str = "You can return it within 30 days.",
    env: Any = "default",
    v03: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": mid,
        "contextId": "ctx-1",
        "role": "agent" if v03 else "ROLE_AGENT",
        "parts": [{"kind": "text", "text": text} if v03 else {"text": text}],
    }
    if v03:
        msg["kind"] = "message"
    if env is not None:
        msg["metadata"] = {EXT: envelope() if env == "default" else env}
        msg["extensions"] = [EXT]
    msg.update(extra)
    return msg


def user_message(
    mid: str = "m-user", text: str = "How long do I have to return an order?", v03: bool = False, **extra: Any
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": mid,
        "role": "user" if v03 else "ROLE_USER",
        "parts": [{"kind": "text", "text": text} if v03 else {"text": text}],
    }
    if v03:
        msg["kind"] = "message"
    msg.update(extra)
    return msg


def jsonrpc_request(method: str = "SendMessage", params: Any = None, rid: Any = "r-1") -> bytes:
    if params is None:
        params = {"message": user_message(), "configuration": {}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def jsonrpc_result(result: Any, rid: Any = "r-1") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def status_event(state: str, message: dict[str, Any] | None = None, rid: Any = "r-1") -> dict[str, Any]:
    """One JSON-RPC SSE event: a statusUpdate of task `t` in context `c`, with an optional status message."""
    status: dict[str, Any] = {"state": state}
    if message is not None:
        status["message"] = message
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": status}},
    }


def sse_body(*docs: Any, sep: str = "\r\n") -> bytes:
    return "".join(f"data: {json.dumps(d)}{sep}{sep}" for d in docs).encode()


def a2a_flow(
    *,
    method: str = "POST",
    path: str = "/a2a/jsonrpc",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    extensions: bool = True,
    status: int = 200,
    response: bytes | None = b"",
    response_headers: dict[str, str] | None = None,
    content_type: str = "application/json",
    err: bool = False,
) -> http.HTTPFlow:
    """An HTTP flow to an A2A agent at agent.test:9000. `response=None` leaves the flow without a response."""
    hdrs = {"content-type": "application/json", "a2a-version": "1.0"}
    if extensions:
        hdrs["a2a-extensions"] = EXT
    hdrs.update(headers or {})
    req = tutils.treq(
        method=method.encode(),
        scheme=b"http",
        host="agent.test",
        port=9000,
        path=path.encode(),
        headers=http.Headers(**{k.replace("-", "_"): v for k, v in hdrs.items()}),
        content=body if body is not None else (jsonrpc_request() if method == "POST" else b""),
    )
    resp: Any = False
    if response is not None:
        rh = {"content-type": content_type}
        rh.update(response_headers or {})
        resp = tutils.tresp(
            status_code=status,
            headers=http.Headers(**{k.replace("-", "_"): v for k, v in rh.items()}),
            content=response,
        )
    return tflow.tflow(req=req, resp=resp, err=err)


def grpc_frame(message: Any) -> bytes:
    """One length-prefixed gRPC message (uncompressed) from a protobuf message."""
    data = message.SerializeToString()
    return b"\0" + len(data).to_bytes(4, "big") + data


def grpc_flow(method: str, request: Any, response_body: bytes = b"", package: str = "lf.a2a.v1") -> http.HTTPFlow:
    """An HTTP/2 gRPC call to `/<package>.A2AService/<method>` carrying `request` (a protobuf message)."""
    f = tflow.tflow(resp=True)
    f.request.url = f"https://agent.test/{package}.A2AService/{method}"
    f.request.method = "POST"
    f.request.http_version = f.response.http_version = "HTTP/2.0"
    f.request.headers = http.Headers(content_type="application/grpc", te="trailers")
    f.request.headers["a2a-extensions"] = EXT
    f.request.content = grpc_frame(request)
    f.response.headers = http.Headers(content_type="application/grpc")
    f.response.content = response_body
    return f


def write_dataset(out: Any, flows: list[http.HTTPFlow], id_format: str = "ex-{:03d}") -> Any:
    """A dataset at `out` of the flows, each extracted as the recorder extracts it (ids from `id_format`)."""
    from converse_tap.a2a.extract import extract
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.addon.flows import exchange_from_flow
    from converse_tap.store.writer import DatasetWriter

    writer = DatasetWriter(out, flush_interval=60)
    writer.start()
    for i, flow in enumerate(flows):
        flow.id = id_format.format(i)
        ext = extract(exchange_from_flow(flow), TextPolicy())
        assert ext is not None, i
        writer.submit(ext)
    writer.close()
    return out
