"""A fast A2A upstream for benchmarks: SendMessage with a converse reply, and a 20-event SSE stream 50 ms apart.

python -m benchmarks.upstream    (prints "listening on PORT")
"""

from __future__ import annotations

import asyncio
import json
import socket

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.factories import agent_message, envelope, status_event

REPLY_MESSAGE = agent_message(env=envelope())
REPLY = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": {"message": REPLY_MESSAGE}}).encode()


def event(i: int) -> bytes:
    done = i == 19
    doc = status_event("TASK_STATE_COMPLETED" if done else "TASK_STATE_WORKING", REPLY_MESSAGE if done else None)
    return b"data: " + json.dumps(doc).encode() + b"\r\n\r\n"


async def send(request: Request) -> Response:
    await request.body()
    return Response(REPLY, media_type="application/json")


async def stream(request: Request) -> StreamingResponse:
    async def events():
        for i in range(20):
            yield event(i)
            if i < 19:
                await asyncio.sleep(0.05)

    return StreamingResponse(events(), media_type="text/event-stream")


app = Starlette(routes=[Route("/a2a", send, methods=["POST"]), Route("/stream", stream, methods=["POST"])])

if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    uvicorn.run(app, fd=sock.fileno(), log_level="warning", access_log=False)
