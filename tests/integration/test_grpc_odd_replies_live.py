"""Live: the odd gRPC replies of tests/a2a/test_grpc_hostile.py, through a real mitmdump with the addon, from an HTTP/2
agent that writes exactly the bytes given (hypercorn, ASGI trailers). The client gets them byte for byte, trailers
too; each call is recorded with its note; no credential from the metadata reaches the dataset."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from hypercorn.asyncio import serve

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.store.reader import load
from tests.integration.grpc_procs import REPLY, REQUEST, STREAM, proxy_options
from tests.integration.procs import mitmdump, tls_listener
from tests.integration.test_live_hunt3 import _h2

pytestmark = pytest.mark.integration

SERVICE = "/lf.a2a.v1.A2AService/"
SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def _frame(data: bytes) -> bytes:
    return b"\0" + len(data).to_bytes(4, "big") + data


OK = [(b"grpc-status", b"0")]
# case -> (method, the reply's DATA chunks as written, headers beside content-type, trailers or None: trailers-only)
CASES: dict[str, tuple[str, list[bytes], list[tuple[bytes, bytes]], list[tuple[bytes, bytes]] | None]] = {
    "trailers-only-ok": ("SendMessage", [], OK, None),
    "empty-message": ("SendMessage", [_frame(b"")], [], OK),
    "reply-then-error": (
        "SendMessage",
        [_frame(REPLY)],
        [],
        [(b"grpc-status", b"13"), (b"grpc-message", b"%FF%1B%5B2J boom"), (b"x-session-token", SECRET.encode())],
    ),
    # two messages in one DATA frame, then one cut over three; a third event empty
    "packed-stream": (
        "SendStreamingMessage",
        [_frame(STREAM[0]) + _frame(b"") + _frame(STREAM[1])[:3], _frame(STREAM[1])[3:9], _frame(STREAM[1])[9:]],
        [],
        OK,
    ),
}
NOTED = {
    "trailers-only-ok": ["grpc_unary_messages:0"],
    "empty-message": ["grpc_message_empty"],
    "reply-then-error": ["grpc_message_not_utf8", "grpc_message_with_error_status"],
    "packed-stream": ["grpc_message_empty:1"],
}
METADATA = {
    "content-type": "application/grpc",
    "te": "trailers",
    "a2a-extensions": CONVERSE_URI,
    "authorization": f"Bearer {SECRET}",
    "x-api-key": SECRET,
    "x-token-bin": base64.b64encode(SECRET.encode()).decode(),
}


async def _agent(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    _method, chunks, headers, trailers = CASES[dict(scope["headers"])[b"x-case"].decode()]
    start = {"type": "http.response.start", "status": 200, "trailers": trailers is not None}
    await send({**start, "headers": [(b"content-type", b"application/grpc"), *headers]})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await asyncio.sleep(0.05)  # (each its own DATA frame)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    if trailers is not None:
        await send({"type": "http.response.trailers", "headers": trailers, "more_trailers": False})


async def _traffic(proxy: str, ca: Path, tmp: Path) -> list[tuple[bytes, list[tuple[bytes, bytes]]]]:
    base, config = tls_listener(tmp)
    done = asyncio.Event()
    server = asyncio.create_task(serve(_agent, config, shutdown_trigger=done.wait))  # type: ignore[arg-type]
    got = []
    try:
        for case, (method, *_rest) in CASES.items():  # one after another: the rows' order is the cases'
            call = (SERVICE + method, {**METADATA, "x-case": case}, _frame(REQUEST), False)
            got += await asyncio.to_thread(_h2, proxy, base, ca, [call])
    finally:
        done.set()
        await server
    return got


def test_the_hunts_grpc_replies_pass_unaltered_and_are_said(tmp_path: Path) -> None:
    out, conf = tmp_path / "data", tmp_path / "conf"
    with mitmdump(out, *proxy_options(conf), "--set", "converse_tap_summary=off") as (proxy, proc):
        got = asyncio.run(_traffic(proxy, conf / "mitmproxy-ca-cert.pem", tmp_path))
    assert "hook failed" not in proc.output, proc.output
    # byte for byte: the DATA as written, the trailers as sent (a trailers-only reply: none)
    assert got == [(b"".join(chunks), trailers or []) for _m, chunks, _h, trailers in CASES.values()]
    ex = load(out, "exchanges").sort_values("ts_start")
    ex.index = list(CASES)
    assert ex["anomalies"].apply(list).to_dict() == NOTED
    assert ex["complete"].all()
    assert ex.loc["reply-then-error", "error_code"] == 13 and ex.loc["reply-then-error", "replies"] == 1
    assert ex.loc["reply-then-error", "error_message"] == "\ufffd\x1b[2J boom"
    assert ex.loc["packed-stream", "sse_events"] == 3 and ex.loc["packed-stream", "replies"] == 1
    for path in out.rglob("*"):  # no credential from the metadata, in any file the recorder wrote
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and base64.b64encode(SECRET.encode()) not in data, path
