"""gRPC parts for integration tests: channels through mitmdump, a canned A2AService that answers fixed bytes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from a2a.types import a2a_pb2 as pb
from google.rpc import error_details_pb2, status_pb2

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.demo.grpc_agent import self_signed

SERVICE = "lf.a2a.v1.A2AService"


def proxy_options(conf: Path) -> tuple[str, ...]:
    """mitmdump options: its CA in `conf` (for the client to trust), upstream self-signed certificates accepted."""
    return ("--set", f"confdir={conf}", "--set", "ssl_insecure=true")


def channel(target: str, root_cert: bytes, proxy: str | None = None) -> grpc.aio.Channel:
    """A TLS channel to `target`; through the HTTP proxy `proxy` (CONNECT) when given, else straight there."""
    options: list[tuple[str, Any]] = [("grpc.http_proxy", proxy)] if proxy else [("grpc.enable_http_proxy", 0)]
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(root_cert), options=options)


def _reply(text: str, mid: str = "a-1") -> pb.Message:
    msg = pb.Message(
        message_id=mid, context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text=text)], extensions=[CONVERSE_URI]
    )
    msg.metadata.update(
        {CONVERSE_URI: {"author": "agent", "answerCoverage": {"availability": "assessed", "coverage": "answered"}}}
    )
    return msg


REQUEST = pb.SendMessageRequest(
    message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="When are you open?")])
).SerializeToString()
TASK_REQUEST = pb.GetTaskRequest(id="t-9").SerializeToString()  # GetTaskRequest and CancelTaskRequest alike
REPLY = pb.SendMessageResponse(message=_reply("Open 12-15.")).SerializeToString()
STREAM = [
    pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(
            task_id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING)
        )
    ).SerializeToString(),
    pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(
            task_id="t-1",
            context_id="c-1",
            status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED, message=_reply("Open 12-15.", "a-2")),
        )
    ).SerializeToString(),
]
NOT_FOUND_DETAILS = status_pb2.Status(code=5, message="Task not found")
_info = NOT_FOUND_DETAILS.details.add()
_info.Pack(error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="a2a-protocol.org"))
UNDECODABLE = b"\x0a\x05ab"  # field 1, length 5, but two bytes follow


class CannedGrpc:
    """A2AService answering fixed bytes over TLS on 127.0.0.1, in a thread with its own event loop.
    SendStreamingMessage holds after its first message until `release` is set; metadata `x-compress: 1` asks
    for a gzip-compressed reply."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.server: Any = None
        self.cert = b""
        self.target = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()
        self._failed: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start())
        except BaseException as e:
            self._failed = e
            return
        finally:
            self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        key, self.cert = self_signed()
        self.server = grpc.aio.server()
        port = self.server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, self.cert)]))
        self.target = f"127.0.0.1:{port}"
        handlers = {
            "SendMessage": grpc.unary_unary_rpc_method_handler(self._send),
            "SendStreamingMessage": grpc.unary_stream_rpc_method_handler(self._stream),
            "GetTask": grpc.unary_unary_rpc_method_handler(self._not_found),
            "CancelTask": grpc.unary_unary_rpc_method_handler(self._undecodable),
            "Frobnicate": grpc.unary_unary_rpc_method_handler(self._send),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        await self.server.start()

    def __enter__(self) -> CannedGrpc:
        self._thread.start()
        self._ready.wait(30)
        if self._failed is not None or not self.target:
            raise RuntimeError(f"canned gRPC server did not start: {self._failed!r}")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        asyncio.run_coroutine_threadsafe(self.server.stop(grace=1), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    async def _send(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if ("x-compress", "1") in tuple(context.invocation_metadata() or ()):
            context.set_compression(grpc.Compression.Gzip)
        await context.send_initial_metadata((("a2a-extensions", CONVERSE_URI),))
        return REPLY

    async def _stream(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        yield STREAM[0]
        await asyncio.to_thread(self.release.wait)
        yield STREAM[1]

    async def _not_found(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.abort(
            grpc.StatusCode.NOT_FOUND,
            "Task not found",
            trailing_metadata=(("grpc-status-details-bin", NOT_FOUND_DETAILS.SerializeToString()),),
        )
        return b""  # not reached

    async def _undecodable(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return UNDECODABLE


async def raw_call(
    chan: grpc.aio.Channel, method: str, request: bytes, metadata: tuple[tuple[str, str], ...] = (), **kw: Any
) -> tuple[Any, ...]:
    """One unary call with bytes in and out: (reply, code, details, initial metadata, trailing metadata)."""
    call = chan.unary_unary(f"/{SERVICE}/{method}")(request, metadata=metadata, **kw)
    try:
        reply = await call
    except grpc.aio.AioRpcError:
        reply = None
    return (
        reply,
        await call.code(),
        await call.details(),
        tuple(await call.initial_metadata()),
        tuple(await call.trailing_metadata()),
    )
