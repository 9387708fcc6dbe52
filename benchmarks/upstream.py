"""A fast A2A upstream for benchmarks: SendMessage with a ~2 KB converse reply, and a 20-event SSE stream.

    python -m benchmarks.upstream    (prints "listening on PORT")

`POST /a2a` answers with a fixed JSON-RPC reply whose agent message carries a converse envelope (five citations,
a paragraph of text); `POST /stream` answers with 20 SSE status events 50 ms apart, the last one completing the
task with that message. A bare asyncio protocol on HTTP/1.1 keep-alive, with every response prebuilt: it costs
the shared machine a few microseconds per request, so that a proxy in front of it, not the upstream, is what a
load generator saturates (bench_proxy prints direct throughput beside proxied throughput to show it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from typing import Any

from tests.factories import EXT, agent_message, envelope, status_event

ANSWER = (
    "You can return an unworn item within 30 days of delivery for a full refund to the original payment method. "
    "Start the return from your order page, print the prepaid label and drop the parcel at any partner point; "
    "refunds are issued within five working days of the parcel reaching our warehouse. Sale items can be "
    "exchanged but not refunded, and personalised items cannot be returned unless they arrive damaged, in which "
    "case send us a photo within 48 hours and we will replace the item at no cost."
)
CITATIONS = [
    {
        "documentId": f"doc-{i:04d}-5d21c0ffee",
        "chunkId": f"chunk-{i:04d}-0c8e7a1b",
        "title": title,
        "sourceUrl": f"https://shop.example/help/{title.lower().replace(' ', '-')}",
    }
    for i, title in enumerate(["Returns policy", "Refund times", "Sale items", "Personalised items", "Damaged goods"])
]
REPLY_MESSAGE = agent_message(text=ANSWER, env=envelope(citations=CITATIONS), extensions=[EXT])
REPLY = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": {"message": REPLY_MESSAGE}}).encode()
EVENTS = 20
EVENT_GAP = 0.05


def event(i: int) -> bytes:
    done = i == EVENTS - 1
    doc = status_event("TASK_STATE_COMPLETED" if done else "TASK_STATE_WORKING", REPLY_MESSAGE if done else None)
    return b"data: " + json.dumps(doc).encode() + b"\r\n\r\n"


def _response(status: bytes, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type
        + b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )  # fmt: skip


UNARY = _response(b"200 OK", REPLY)
NOT_FOUND = _response(b"404 Not Found", b"not found\n", b"text/plain")
SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)


class Http(asyncio.Protocol):
    """One keep-alive connection: requests answered in order; a stream holds later requests until it ends."""

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.streaming = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._serve()

    def _serve(self) -> None:
        assert self.transport is not None
        while not self.streaming:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            m = _LENGTH.search(self.buf, 0, end + 2)
            size = end + 4 + (int(m.group(1)) if m else 0)
            if len(self.buf) < size:
                return
            line = self.buf[: self.buf.find(b"\r\n")]
            self.buf = self.buf[size:]
            path = line.split(b" ")[1] if line.count(b" ") >= 2 else b""
            if path.startswith(b"/a2a"):
                self.transport.write(UNARY)
            elif path.startswith(b"/stream"):
                self.streaming = True
                asyncio.get_running_loop().create_task(self._stream())
            else:
                self.transport.write(NOT_FOUND)

    async def _stream(self) -> None:
        assert self.transport is not None
        self.transport.write(SSE_HEAD)
        for i in range(EVENTS):
            if self.transport.is_closing():
                return
            chunk = event(i)
            self.transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            if i < EVENTS - 1:
                await asyncio.sleep(EVENT_GAP)
        self.transport.write(b"0\r\n\r\n")
        self.streaming = False
        self._serve()


async def serve(sock: socket.socket) -> None:
    server = await asyncio.get_running_loop().create_server(Http, sock=sock, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(sock))
