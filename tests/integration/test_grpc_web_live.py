"""gRPC-Web through a real mitmdump with the addon: an upstream answering a browser's gRPC-Web call (binary and
base64 text) in small writes, recorded live, gives the rows the same exchange gives read whole."""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from converse_tap.store.reader import load
from tests.addon.test_worker_grpc_web import DONE, EXT, SEND, WORKING, frame, trailers, whole
from tests.integration.procs import mitmdump

pytestmark = pytest.mark.integration

PATH = "/lf.a2a.v1.A2AService/SendStreamingMessage"
BODY = (
    frame(WORKING.SerializeToString())
    + frame(DONE.SerializeToString())
    + trailers("grpc-status: 0", f"a2a-extensions: {EXT}")
)


def _body(ctype: str) -> bytes:
    if "-text" not in ctype:
        return BODY
    return base64.b64encode(BODY[:11]) + base64.b64encode(BODY[11:])  # two writes, each padded


class GrpcWebUpstream:
    """uvicorn in a thread answering gRPC-Web in the request's own form, 7 bytes per write."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        app = Starlette(routes=[Route(PATH, self._stream, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True)

    async def _stream(self, request: Request) -> StreamingResponse:
        ctype = request.headers["content-type"]
        body = _body(ctype)

        async def chunks() -> Any:
            for i in range(0, len(body), 7):
                yield body[i : i + 7]
                await asyncio.sleep(0)

        return StreamingResponse(chunks(), media_type=ctype)

    def __enter__(self) -> GrpcWebUpstream:
        self.thread.start()
        ready = threading.Event()
        while not self.server.started:
            ready.wait(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def test_grpc_web_streams_are_recorded_live_as_read_whole(tmp_path) -> None:
    out = tmp_path / "data"
    forms = ["application/grpc-web+proto", "application/grpc-web-text"]
    requests = {c: frame(SEND.SerializeToString()) for c in forms}
    requests["application/grpc-web-text"] = base64.b64encode(requests["application/grpc-web-text"])
    with GrpcWebUpstream() as up, mitmdump(out) as (proxy, proc), httpx.Client(proxy=proxy, timeout=30) as client:
        for ctype in forms:
            headers = {"content-type": ctype, "x-grpc-web": "1", "a2a-extensions": EXT}
            reply = client.post(up.base + PATH, content=requests[ctype], headers=headers)
            assert reply.status_code == 200 and reply.content == _body(ctype)  # relayed byte for byte
    assert proc.popen.returncode == 0, proc.output
    ex = load(out, "exchanges").sort_values("ts_start")
    msgs = load(out, "messages")
    assert ex["content_type"].tolist() == [f.split(";")[0] for f in forms]
    for (_, row), ctype in zip(ex.iterrows(), forms, strict=True):
        expected = whole(row["exchange_id"], ctype, requests[ctype], _body(ctype)).exchange
        for column in ("binding", "method", "streamed", "sse_events", "replies", "complete", "converse_echoed"):
            assert row[column] == expected[column], (ctype, column)
        assert list(row["anomalies"]) == expected["anomalies"] == []
        assert (row["sse_events"], row["replies"], row["complete"]) == (2, 1, True)
        mine = msgs[msgs["exchange_id"] == row["exchange_id"]].sort_values("seq")
        assert mine["message_id"].tolist() == ["u-1", "a-1"] and mine["has_envelope"].tolist()[1]
